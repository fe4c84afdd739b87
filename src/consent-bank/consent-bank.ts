import type { BankOptions } from './bank-profile.js';
import { startBank, type CallKind, type RunningBank } from './bank-shell.js';
import { chileProfile } from './chile/chile-profile.js';

/*
 * The simulated Chilean consent bank (`bancoabierto`, docs/open-finance.md): the bank shell (bank-shell.ts)
 * with the Chilean profile (chile/chile-profile.ts).
 */

export { ACCESS_TOKEN_TTL_S, CONSENT_BANK_DEFAULT_PORT, CONSENT_BANK_PATH } from './chile/chile-profile.js';
export { GRANT_MANAGEMENT_PATH } from './chile/grant-management.js';
export const PAR_PATH = '/par';
export type { CallKind };

export type ConsentBankOptions = BankOptions;
export type ConsentBank = Omit<RunningBank, 'context'>;

export async function startConsentBank(options: ConsentBankOptions): Promise<ConsentBank> {
  const { context: _context, ...bank } = await startBank(options, chileProfile);
  return bank;
}
