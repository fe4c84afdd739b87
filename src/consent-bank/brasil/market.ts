import { cnpjCheckDigits, cpfCheckDigits, normaliseCpf } from '../../cpf/cpf.js';
import type { Market } from '../resources.js';

/*
 * What makes the simulated bank Brazilian besides its protocol: its customers sign in with a CPF, its
 * accounts are in BRL, its tax ids are CNPJs and CPFs. The data is the credential sandbox's, as the Chilean
 * bank's is (each customer reads the rows of a sandbox RUT), so the two banks show the same movements.
 */

/** The bank's own CNPJ (a valid, invented one). */
export const BANK_CNPJ = `999999990001${cnpjCheckDigits('999999990001')}`;

/** A sandbox RUT's body as a Brazilian tax id: a person's CPF, a company's (RUT ≥ 50 million) CNPJ. */
function taxIdOfRut(rut: string): { id: string; personType: 'PESSOA_NATURAL' | 'PESSOA_JURIDICA' } {
  const body = rut.split('-')[0] ?? '0';
  if (Number(body) >= 50_000_000) {
    const twelve = `${body.padStart(8, '0')}0001`;
    return { id: `${twelve}${cnpjCheckDigits(twelve)}`, personType: 'PESSOA_JURIDICA' };
  }
  const nine = body.padStart(9, '0');
  return { id: `${nine}${cpfCheckDigits(nine)}`, personType: 'PESSOA_NATURAL' };
}

/** The sandbox's CLP amounts read as centavos: a 1,500,000 CLP salary is R$ 15.000,00. USD stays USD. */
export const BRASIL_MARKET: Market = {
  currency: (sandboxCurrency) => (sandboxCurrency === 'CLP' ? 'BRL' : sandboxCurrency),
  bankTaxId: BANK_CNPJ,
  party: taxIdOfRut,
};

export const BRASIL_PASSWORD = 'sandbox';

export interface BrasilUser {
  cpf: string;
  /** The sandbox RUT whose data the customer reads. */
  dataRut: string;
  /** The bank refuses every consent of this customer (the refusal path with no setup). */
  refusesConsent?: true;
  note: string;
}

export const BRASIL_USERS: readonly BrasilUser[] = [
  { cpf: '52998224725', dataRut: '11111111-1', note: 'checking, card, savings' },
  { cpf: '11144477735', dataRut: '55555555-5', note: 'checking, card, savings, USD checking' },
  {
    cpf: '12345678909',
    dataRut: '21212121-5',
    note: 'a busy holder: about 1,100 movements in 90 days (several pages of 100)',
  },
  { cpf: '39053344705', dataRut: '12345678-5', refusesConsent: true, note: 'the bank refuses the consent' },
];

export function findBrasilUser(cpfText: string): BrasilUser | null {
  const cpf = normaliseCpf(cpfText);
  return BRASIL_USERS.find((user) => user.cpf === cpf) ?? null;
}

/** The customer a sign-in names, or null: an unknown CPF and a wrong password are one answer. */
export function signInBrasil(cpfText: string, password: string): BrasilUser | null {
  const user = findBrasilUser(cpfText);
  return user && password === BRASIL_PASSWORD ? user : null;
}
