import type { BankOptions } from '../bank-profile.js';
import { startBank, type RunningBank } from '../bank-shell.js';
import { ConsentBankFaults } from '../faults.js';
import type { ConsentRecord } from './consents.js';
import { brasilProfile, consentStore } from './brasil-profile.js';

/*
 * The simulated Open Finance Brasil bank (`bancoabierto-br`): the bank shell (../bank-shell.ts) with the
 * Brazilian profile (brasil-profile.ts).
 */

export { BRASIL_ACCESS_TOKEN_TTL_S, BRASIL_BANK_PATH, DATA_SCOPES } from './brasil-profile.js';
export { CONSENT_NAMESPACE, consentIdOfScope } from './consent-ids.js';
export { CONSENTS_BASE, RESOURCES_BASE } from './brasil-apis.js';

export type BrasilBankOptions = BankOptions;

export interface BrasilBank extends Omit<RunningBank, 'context'> {
  /** A consent as the bank holds it now (tests read it to see what a revoke did). */
  consent(consentId: string): Promise<ConsentRecord | null>;
}

export async function startBrasilBank(options: BrasilBankOptions): Promise<BrasilBank> {
  // Brazil's customers carry no built-in faults: the bank's own set, unless a test hands one.
  const { context, ...bank } = await startBank(
    { ...options, faults: options.faults ?? new ConsentBankFaults() },
    brasilProfile,
  );
  const consents = consentStore(context);
  return { ...bank, consent: (consentId) => consents.load(consentId) };
}
