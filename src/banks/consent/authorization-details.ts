import { Ajv } from 'ajv';
import { SHARED_DATA_ORDER, sharedDataOf, type SharedData } from '../../open-finance/consent-wording.js';

/*
 * Rich Authorization Requests (RFC 9396) as the CMF's draft annex uses them: one `Accounts` entry whose
 * `actions` say what may be read, with an optional validity window. The appliance asks for them in the PAR,
 * keeps what the bank says was authorised on the link (links/consent/), and words them for the end user
 * (widget/consent/consent-screen.ts).
 */

/** What a consent may cover, in the end user's terms (the widget's consent screen words each one). */
export type ConsentCoverage = SharedData;
export const CONSENT_COVERAGES: readonly ConsentCoverage[] = SHARED_DATA_ORDER;

export const ACCOUNT_ACTIONS = [
  'ReadAccounts',
  'ReadBalances',
  'ReadTransactions',
  'ReadCreditCards',
] as const;
export type AccountAction = (typeof ACCOUNT_ACTIONS)[number];

export interface AuthorizationDetail {
  type: string;
  actions?: string[];
  identifier?: string;
  privileges?: string[];
  purpose?: string;
  consentType?: string;
  recurring?: boolean;
  frequency?: string;
  /** RFC 3339 times; a consent without `validTo` lasts until it is revoked (at most the bank's maximum). */
  validFrom?: string;
  validTo?: string;
}

/** Which action lets the holder's data of each kind be read. */
export const ACTION_COVERS: Readonly<Record<AccountAction, ConsentCoverage>> = {
  ReadAccounts: 'accounts',
  ReadBalances: 'balances',
  ReadTransactions: 'movements',
  ReadCreditCards: 'credit_cards',
};

const detailsSchema = {
  type: 'array',
  maxItems: 20,
  items: {
    type: 'object',
    required: ['type'],
    properties: {
      type: { type: 'string', minLength: 1, maxLength: 100 },
      actions: { type: 'array', maxItems: 20, items: { type: 'string', maxLength: 100 } },
      identifier: { type: 'string', maxLength: 200 },
      privileges: { type: 'array', maxItems: 20, items: { type: 'string', maxLength: 100 } },
      purpose: { type: 'string', maxLength: 500 },
      consentType: { type: 'string', maxLength: 100 },
      recurring: { type: 'boolean' },
      frequency: { type: 'string', maxLength: 200 },
      validFrom: { type: 'string', format: 'date-time' },
      validTo: { type: 'string', format: 'date-time' },
    },
  },
} as const;

const ajv = new Ajv({ strict: false });
ajv.addFormat('date-time', (value: string) => !Number.isNaN(Date.parse(value)) && /T/.test(value));
const validate = ajv.compile(detailsSchema);

/** `authorization_details` from a token or grant answer, or null when it is not a list of RAR entries. */
export function parseAuthorizationDetails(value: unknown): AuthorizationDetail[] | null {
  return validate(value) ? (value as AuthorizationDetail[]) : null;
}

/** What the `Accounts` entries allow, in the order the consent screen lists it. Unknown actions are ignored. */
export function coverageOf(details: readonly AuthorizationDetail[]): ConsentCoverage[] {
  return sharedDataOf(details.filter((d) => d.type === 'Accounts').flatMap((d) => d.actions ?? []));
}

/** When the consent ends: the earliest `validTo` of its entries, or null (until revoked). */
export function validUntil(details: readonly AuthorizationDetail[]): number | null {
  const ends = details.map((d) => (d.validTo ? Date.parse(d.validTo) : NaN)).filter((t) => !Number.isNaN(t));
  return ends.length === 0 ? null : Math.min(...ends);
}

/** The details the appliance asks for: every `Accounts` action, for `months` from `now`. */
export function requestedDetails(now: number, months: number, purpose: string): AuthorizationDetail[] {
  const to = new Date(now);
  to.setUTCMonth(to.getUTCMonth() + months);
  return [
    {
      type: 'Accounts',
      actions: [...ACCOUNT_ACTIONS],
      purpose,
      validFrom: new Date(now).toISOString(),
      validTo: to.toISOString(),
    },
  ];
}
