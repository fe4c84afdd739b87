/**
 * The sandbox password picks what the fake bank does (docs/sandbox.md is the developer-facing list).
 * `history` is the link's sync history before the attempt, as the sync engine passes it.
 */
export const SANDBOX_SCENARIOS = {
  /** Every login succeeds. */
  sandbox: 'success',
  /** Interactive logins ask for the code `123456`; scheduled (non-interactive) ones succeed without it. */
  'sandbox-mfa': 'mfa',
  /** Every login fails with `rejected_credentials`. */
  'sandbox-rejected': 'rejected',
  /** Every login fails with `bank_unavailable`. */
  'sandbox-unavailable': 'unavailable',
  /** `bank_unavailable` when `history.attempts` is odd, success when it is even (the first attempt passes). */
  'sandbox-flaky': 'flaky',
  /** Success while `history.successes` is 0, `rejected_credentials` afterwards. */
  'sandbox-expiring': 'expiring',
} as const;

export type SandboxPassword = keyof typeof SANDBOX_SCENARIOS;
export type SandboxScenario = (typeof SANDBOX_SCENARIOS)[SandboxPassword];

export const SANDBOX_PASSWORDS = Object.keys(SANDBOX_SCENARIOS) as SandboxPassword[];

/** The code that completes a `sandbox-mfa` login. */
export const SANDBOX_MFA_CODE = '123456';

export function scenarioOf(password: string): SandboxScenario | null {
  return Object.hasOwn(SANDBOX_SCENARIOS, password) ? SANDBOX_SCENARIOS[password as SandboxPassword] : null;
}

/** What a login does before any data is read: fail with a code, ask for MFA, or open a session. */
export type LoginOutcome =
  { kind: 'fail'; code: 'rejected_credentials' | 'bank_unavailable' } | { kind: 'mfa' } | { kind: 'session' };

export function loginOutcome(
  scenario: SandboxScenario,
  interactive: boolean,
  history: { attempts: number; successes: number },
): LoginOutcome {
  switch (scenario) {
    case 'success':
      return { kind: 'session' };
    case 'mfa':
      return interactive ? { kind: 'mfa' } : { kind: 'session' };
    case 'rejected':
      return { kind: 'fail', code: 'rejected_credentials' };
    case 'unavailable':
      return { kind: 'fail', code: 'bank_unavailable' };
    case 'flaky':
      return history.attempts % 2 === 1 ? { kind: 'fail', code: 'bank_unavailable' } : { kind: 'session' };
    case 'expiring':
      return history.successes === 0 ? { kind: 'session' } : { kind: 'fail', code: 'rejected_credentials' };
  }
}
