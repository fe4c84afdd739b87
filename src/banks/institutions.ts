import type { HolderType } from './connector.js';

export type Product = 'movements' | 'income' | 'backfill';
export const PRODUCTS: readonly Product[] = ['movements', 'income', 'backfill'];

export interface Institution {
  id: string;
  name: string;
  country: 'CL';
  /** Products and holder types the bank offers; a combination may still be unavailable (see below). */
  products: Product[];
  holderTypes: HolderType[];
  /** Combinations not offered yet, as `product:holderType`. */
  unavailable: string[];
}

/** The 11 banks of the design. Backfill is offered by `bci` to business holders only. */
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
];

/**
 * The bank codes: the one list, derived from the institutions. The config schema's `banks.connectors` keys
 * and the API's `bank_id` enums are this list, so a bank added above is accepted everywhere at once.
 */
export const BANK_IDS: readonly string[] = INSTITUTIONS.map((institution) => institution.id);
export const BACKFILL_BANK = 'bci';

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
