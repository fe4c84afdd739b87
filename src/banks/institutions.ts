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
 * Authorisation profiles. `fapi2-cl`: FAPI 2.0, PAR, PKCE, mTLS, RAR and Grant Management (the CMF's draft).
 * `fapi1-br`: Open Finance Brasil's FAPI 1.0 Advanced (PAR, PKCE, `tls_client_auth`, JARM, PS256) with its
 * consents API: a consent is created with a `client_credentials` token and authorised with the scope
 * `consent:<consentId>`.
 */
export const SECURITY_PROFILES = ['fapi2-cl', 'fapi1-br'] as const;
export type SecurityProfile = (typeof SECURITY_PROFILES)[number];
export const DATA_PROFILES = [
  'ob-br-accounts-2',
  'ob-br-credit-cards-2',
  'ob-br-consents-3',
  'ob-br-resources-3',
] as const;
export type DataProfile = (typeof DATA_PROFILES)[number];
export const COUNTRIES = ['CL', 'BR'] as const;
export type Country = (typeof COUNTRIES)[number];

/**
 * The standards a consent bank speaks. `security` names the authorisation profile (`fapi2-cl`: FAPI 2.0
 * with PAR, PKCE, mTLS client authentication and certificate-bound tokens, as the CMF's draft annex asks);
 * `data` names the resource API shapes (Open Finance Brasil's accounts 2.x and credit cards 2.x, adapted to
 * CLP and RUT, until the CMF publishes its own files).
 */
export interface ConsentProfile {
  security: SecurityProfile;
  data: readonly DataProfile[];
  covers: readonly ConsentCoverage[];
  /** The longest consent the bank grants: 36 months in the CMF's draft. */
  maxDurationMonths: number;
}

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
  country: Country;
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
  /**
   * An institution the operator added in `banks.institutions`: it connects by consent only, once `svc banks
   * register` registered a consent client for it; until then it is listed nowhere a link could start.
   */
  operatorDefined?: true;
  /** The standards it speaks by consent; the built-in banks speak Chile's draft profile. */
  profile?: ConsentProfile;
}

/** The simulated consent bank that ships with the appliance (src/consent-bank/), in test mode only. */
export const CONSENT_SANDBOX_BANK_ID = 'bancoabierto';
/** The simulated Open Finance Brasil bank (src/consent-bank/brasil/), in test mode only. */
export const BRASIL_SANDBOX_BANK_ID = 'bancoabierto-br';

/**
 * The 11 banks of the design and the simulated consent bank. Backfill is offered by `bci` to business
 * holders only. The operator may add consent banks (`banks.institutions`): `institutionsOf` gives both.
 */
export const BUILT_IN_INSTITUTIONS: readonly Institution[] = [
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
    profile: BRASIL_PROFILE,
  },
];

/** The built-in bank codes. The config schema refuses them as ids of operator institutions. */
export const BUILT_IN_BANK_IDS: readonly string[] = BUILT_IN_INSTITUTIONS.map(
  (institution) => institution.id,
);

/** A bank code: what `bank_id` columns (24 characters) and the built-in codes fit. */
export const BANK_ID_PATTERN = '^[a-z][a-z0-9-]{1,23}$';

/** One entry of `banks.institutions`, as config.json holds it (src/config/schema.ts validates it). */
export interface OperatorInstitutionSettings {
  id: string;
  name: string;
  country: Country;
  connection: 'consent';
  profile: ConsentProfile;
  products: readonly Product[];
  holderTypes: readonly HolderType[];
}

const catalogues = new WeakMap<readonly OperatorInstitutionSettings[], readonly Institution[]>();

/**
 * The one list of institutions: the built-in banks, then the operator's (`config.banks.institutions`), in
 * the order the operator wrote them. The config is frozen once loaded, so each list is built once.
 */
export function institutionsOf(config: {
  banks: { institutions: readonly OperatorInstitutionSettings[] };
}): readonly Institution[] {
  const settings = config.banks.institutions;
  let all = catalogues.get(settings);
  if (!all) {
    all = [
      ...BUILT_IN_INSTITUTIONS,
      ...settings.map((entry): Institution => ({
        id: entry.id,
        name: entry.name,
        country: entry.country,
        products: [...entry.products],
        holderTypes: [...entry.holderTypes],
        unavailable: [],
        operatorDefined: true,
        profile: entry.profile,
      })),
    ];
    catalogues.set(settings, all);
  }
  return all;
}

/** The bank codes of `institutionsOf(config)`. */
export function bankIdsOf(config: Parameters<typeof institutionsOf>[0]): string[] {
  return institutionsOf(config).map((institution) => institution.id);
}

export const BACKFILL_BANK = 'bci';

/**
 * The banks a credential login reaches (all but the consent sandbox). The sandbox's generator picks
 * counterparty banks from this list, so its seeded data stays what it was before consent banks came.
 */
export const CREDENTIAL_BANK_IDS: readonly string[] = BUILT_IN_INSTITUTIONS.filter(
  (i) => !i.consentSandbox,
).map((i) => i.id);

/**
 * How `institution` connects in `mode`: the consent sandbox always by consent (it has no other way in); any
 * other bank by consent when a consent client is registered for it in that mode, by credentials otherwise.
 */
export function connectionMethod(
  institution: Institution,
  mode: 'live' | 'test',
  registered: boolean,
): ConnectionMethod {
  if (institution.consentSandbox || institution.operatorDefined) return 'consent';
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

/** The institution with this code among `institutions` (by default the built-in ones). */
export function findInstitution(
  id: string,
  institutions: readonly Institution[] = BUILT_IN_INSTITUTIONS,
): Institution | undefined {
  return institutions.find((institution) => institution.id === id);
}

/** The standards an institution speaks by consent: its own profile, else Chile's draft. */
export function consentProfileOf(institution: Institution): ConsentProfile {
  return institution.profile ?? CHILE_DRAFT_PROFILE;
}

/** Whether the bank offers `product` to `holderType` at all (in any mode). */
export function offers(institution: Institution, product: Product, holderType: HolderType): boolean {
  return (
    institution.products.includes(product) &&
    institution.holderTypes.includes(holderType) &&
    !institution.unavailable.includes(`${product}:${holderType}`)
  );
}
