import { normaliseRut } from '../rut/rut.js';
import type { UserFaults } from './faults.js';

/*
 * The sandbox users of the simulated consent bank (docs/open-finance.md lists them). Every one signs in with
 * the password `sandbox`; some carry a fault of their own, so a developer can walk into each failure from the
 * widget with no setup. Their data comes through the bank's CustomerData port (customer-data.ts); in test mode
 * it is the credential sandbox's, so the same person has the same accounts and movements at both.
 */

export const CONSENT_BANK_PASSWORD = 'sandbox';

export interface SandboxUser {
  rut: string;
  faults: UserFaults;
  /** What the docs say about the user. */
  note: string;
}

export const CONSENT_BANK_USERS: readonly SandboxUser[] = [
  { rut: '11111111-1', faults: {}, note: 'checking, card, savings' },
  { rut: '12345678-5', faults: {}, note: 'checking, card, savings' },
  { rut: '55555555-5', faults: {}, note: 'checking, card, savings, USD checking' },
  {
    rut: '21212121-5',
    faults: {},
    note: 'a busy holder: about 1,100 movements in 90 days (checking, card, savings, cuenta vista)',
  },
  { rut: '33333333-3', faults: { refuseConsent: true }, note: 'the bank refuses the consent' },
  { rut: '44444444-4', faults: { resourceStatus: 429 }, note: 'resource calls answer 429, Retry-After 30' },
  { rut: '66666666-6', faults: { delayMs: 4_500 }, note: 'resource calls answer after 4.5 s' },
  { rut: '77777777-7', faults: { breakSchema: true }, note: 'resource answers break the schema' },
  { rut: '88888888-8', faults: { unboundTokens: true }, note: 'access tokens not bound to the certificate' },
  { rut: '99999999-9', faults: { acceptReplayedCode: true }, note: 'a code can be exchanged twice' },
];

export function findSandboxUser(rutText: string): SandboxUser | null {
  const rut = normaliseRut(rutText);
  return CONSENT_BANK_USERS.find((user) => user.rut === rut) ?? null;
}

/** The user a sign-in names, or null: an unknown RUT and a wrong password are one answer. */
export function signIn(rutText: string, password: string): SandboxUser | null {
  const user = findSandboxUser(rutText);
  return user && password === CONSENT_BANK_PASSWORD ? user : null;
}

export function builtInFaults(rut: string): UserFaults {
  return CONSENT_BANK_USERS.find((user) => user.rut === rut)?.faults ?? {};
}
