import { CONSENT_COVERAGES, type ConsentCoverage } from './consent/authorization-details.js';
import type { HolderType } from './connector.js';

export type Product = 'movements' | 'income' | 'backfill';
export const PRODUCTS: readonly Product[] = ['movements', 'income', 'backfill'];

/**
 * How an end user connects a bank: by typing their bank login (`credentials`, which the appliance seals and
 * a connector replays), or by `consent`: the bank's own authorisation page, after which the appliance holds
 * a grant and its tokens, never a password (docs/open-finance.md).
 */
export type ConnectionMethod = 'credentials' | 'consent';

/**
 * The standards a consent bank speaks. `security` names the authorisation profile (`fapi2-cl`: FAPI 2.0
 * with PAR, PKCE, mTLS client authentication and certificate-bound tokens, as the CMF's draft annex asks);
 * `data` names the resource API shapes (Open Finance Brasil's accounts 2.x and credit cards 2.x, adapted to
 * CLP and RUT, until the CMF publishes its own files).
 */
export interface ConsentProfile {
  security: SecurityProfile;
  data: readonly ('ob-br-accounts-2' | 'ob-br-credit-cards-2' | 'ob-br-consents-3' | 'ob-br-resources-3')[];
  covers: readonly ConsentCoverage[];
  /** The longest consent the bank grants: 36 months in the CMF's draft. */
  maxDurationMonths: number;
}

/**
 * `fapi2-cl`: FAPI 2.0, PAR, PKCE, mTLS, RAR and Grant Management (the CMF's draft). `fapi1-br`: Open
 * Finance Brasil's FAPI 1.0 Advanced (PAR, PKCE, `tls_client_auth`, JARM, PS256) with its consents API: a
 * consent is created with a `client_credentials` token and authorised with the scope `consent:<consentId>`.
 */
export type SecurityProfile = 'fapi2-cl' | 'fapi1-br';
export const SECURITY_PROFILES: readonly SecurityProfile[] = ['fapi2-cl', 'fapi1-br'];

/** Chile's draft profile: every consent bank registered today gets it (the annex is not final yet). */
export const CHILE_DRAFT_PROFILE: ConsentProfile = {
  security: 'fapi2-cl',
  data: ['ob-br-accounts-2', 'ob-br-credit-cards-2'],
  covers: CONSENT_COVERAGES,
  maxDurationMonths: 36,
};

/** Open Finance Brasil as it is live: consents 3, resources 3, accounts 2.4 and credit cards 2.3 in BRL. */
export const BRASIL_PROFILE: ConsentProfile = {
  security: 'fapi1-br',
  data: ['ob-br-consents-3', 'ob-br-resources-3', 'ob-br-accounts-2', 'ob-br-credit-cards-2'],
  covers: CONSENT_COVERAGES,
  maxDurationMonths: 12,
};

export interface Institution {
  id: string;
  name: string;
  country: 'CL' | 'BR';
  /** How a consent with this bank is made; absent: Chile's draft profile (CHILE_DRAFT_PROFILE). */
  consentProfile?: ConsentProfile;
  /** Products and holder types the bank offers; a combination may still be unavailable (see below). */
  products: Product[];
  holderTypes: HolderType[];
  /** Combinations not offered yet, as `product:holderType`. */
  unavailable: string[];
  /**
   * A bank that exists only as a consent bank in test mode (the simulated bank that ships with the
   * appliance): never reached with credentials, never in live mode. Other banks connect by consent where
   * the operator registered a consent client for them (`svc banks register`), by credentials elsewhere.
   */
  consentSandbox?: true;
}

/** The 11 banks of the design. Backfill is offered by `bci` to business holders only. */
/** The simulated consent bank that ships with the appliance (src/consent-bank/), in test mode only. */
export const CONSENT_SANDBOX_BANK_ID = 'bancoabierto';
/** The simulated Open Finance Brasil bank (src/consent-bank/brasil/), in test mode only. */
export const BRASIL_SANDBOX_BANK_ID = 'bancoabierto-br';

export const INSTITUTIONS: readonly Institution[] = [
  {
    id: 'bancochile',
    name: 'Banco de Chile',
    country: 'CL',
    products: ['movements', 'income'],
    holderTypes: ['individual', 'business'],
    unavailable: [],
  },
  {
    id: 'bancoestado',
    name: 'BancoEstado',
    country: 'CL',
    products: ['movements', 'income'],
    holderTypes: ['individual', 'business'],
    unavailable: ['income:business'],
  },
  {
    id: 'santander',
    name: 'Banco Santander Chile',
    country: 'CL',
    products: ['movements', 'income'],
    holderTypes: ['individual', 'business'],
    unavailable: [],
  },
  {
    id: 'bci',
    name: 'Bci',
    country: 'CL',
    products: ['movements', 'income', 'backfill'],
    holderTypes: ['individual', 'business'],
    unavailable: ['backfill:individual'],
  },
  {
    id: 'itau',
    name: 'Itaú Chile',
    country: 'CL',
    products: ['movements', 'income'],
    holderTypes: ['individual', 'business'],
    unavailable: [],
  },
  {
    id: 'scotiabank',
    name: 'Scotiabank Chile',
    country: 'CL',
    products: ['movements', 'income'],
    holderTypes: ['individual', 'business'],
    unavailable: ['movements:business', 'income:business'],
  },
  {
    id: 'security',
    name: 'Banco Security',
    country: 'CL',
    products: ['movements', 'income'],
    holderTypes: ['individual', 'business'],
    unavailable: [],
  },
  {
    id: 'bice',
    name: 'Banco BICE',
    country: 'CL',
    products: ['movements', 'income'],
    holderTypes: ['individual', 'business'],
    unavailable: ['income:individual'],
  },
  {
    id: 'falabella',
    name: 'Banco Falabella',
    country: 'CL',
    products: ['movements', 'income'],
    holderTypes: ['individual'],
    unavailable: [],
  },
  {
    id: 'ripley',
    name: 'Banco Ripley',
    country: 'CL',
    products: ['movements'],
    holderTypes: ['individual'],
    unavailable: [],
  },
  {
    id: 'consorcio',
    name: 'Banco Consorcio',
    country: 'CL',
    products: ['movements', 'income'],
    holderTypes: ['individual', 'business'],
    unavailable: ['movements:business', 'income:business'],
  },
  {
    id: CONSENT_SANDBOX_BANK_ID,
    name: 'Banco Abierto (simulado)',
    country: 'CL',
    products: ['movements', 'income'],
    holderTypes: ['individual'],
    unavailable: [],
    consentSandbox: true,
  },
  {
    id: BRASIL_SANDBOX_BANK_ID,
    name: 'Banco Aberto (simulado, Brasil)',
    country: 'BR',
    products: ['movements', 'income'],
    holderTypes: ['individual'],
    unavailable: [],
    consentSandbox: true,
    consentProfile: BRASIL_PROFILE,
  },
];

/** The consent profile a bank speaks: its own, else Chile's draft. */
export function consentProfileOf(institution: Institution): ConsentProfile {
  return institution.consentProfile ?? CHILE_DRAFT_PROFILE;
}

/**
 * The bank codes: the one list, derived from the institutions. The config schema's `banks.connectors` keys
 * and the API's `bank_id` enums are this list, so a bank added above is accepted everywhere at once.
 */
export const BANK_IDS: readonly string[] = INSTITUTIONS.map((institution) => institution.id);
export const BACKFILL_BANK = 'bci';

/**
 * The banks a credential login reaches (all but the consent sandbox). The sandbox's generator picks
 * counterparty banks from this list, so its seeded data stays what it was before consent banks came.
 */
export const CREDENTIAL_BANK_IDS: readonly string[] = INSTITUTIONS.filter((i) => !i.consentSandbox).map(
  (i) => i.id,
);

/**
 * How `institution` connects in `mode`: the consent sandbox always by consent (it has no other way in); any
 * other bank by consent when a consent client is registered for it in that mode, by credentials otherwise.
 */
export function connectionMethod(
  institution: Institution,
  mode: 'live' | 'test',
  registered: boolean,
): ConnectionMethod {
  if (institution.consentSandbox) return 'consent';
  return registered ? 'consent' : 'credentials';
}

/**
 * Whether a consent institution can be reached in `mode` at all: the consent sandbox only in test mode
 * (the simulated bank runs on loopback); a registered bank wherever it is registered.
 */
export function consentReachable(
  institution: Institution,
  mode: 'live' | 'test',
  registered: boolean,
): boolean {
  return institution.consentSandbox ? mode === 'test' : registered;
}

export function findInstitution(id: string): Institution | undefined {
  return INSTITUTIONS.find((institution) => institution.id === id);
}

/** Whether the bank offers `product` to `holderType` at all (in any mode). */
export function offers(institution: Institution, product: Product, holderType: HolderType): boolean {
  return (
    institution.products.includes(product) &&
    institution.holderTypes.includes(holderType) &&
    !institution.unavailable.includes(`${product}:${holderType}`)
  );
}
