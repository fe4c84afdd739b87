import t from 'tap';
import { ACCOUNT_TRANSITIONS, type AccountStatus } from '../../src/accounts/store.js';
import { IllegalTransitionError, transition, type Transitions } from '../../src/errors/illegal-transition.js';
import { ACTIVE_JOB_STATUSES, JOB_TRANSITIONS, type JobStatus } from '../../src/jobs/jobs.js';
import { LINK_TRANSITIONS, syncFailed, syncSucceeded } from '../../src/links/link-states.js';
import type { LinkStatus } from '../../src/links/store.js';
import { INTENT_TRANSITIONS } from '../../src/refresh/intent-states.js';
import type { IntentStatus } from '../../src/refresh/store.js';
import { SESSION_TRANSITIONS, sessionState, type SessionState } from '../../src/widget/sessions.js';
import { linkRowAt } from '../helpers/link-row.js';

const AT = Date.UTC(2026, 5, 15, 15, 0, 0);

/** Every (state, change) pair of a machine, as `from -change-> to`, or `from -change-> ✗` when refused. */
function moves<S extends string, C extends string>(
  machine: string,
  table: Transitions<S, C>,
  states: readonly S[],
): string[] {
  const out: string[] = [];
  for (const from of states)
    for (const change of Object.keys(table) as C[]) {
      try {
        out.push(`${from} -${change}-> ${transition(machine, table, from, change)}`);
      } catch (error) {
        if (!(error instanceof IllegalTransitionError)) throw error;
        out.push(`${from} -${change}-> ✗`);
      }
    }
  return out;
}

t.test('an illegal transition throws an error that names the row, its state and the change', async (t) => {
  t.throws(() => transition('refresh intent', INTENT_TRANSITIONS, 'succeeded', 'start', 'ri_1'), {
    name: 'IllegalTransitionError',
    message:
      'refresh intent ri_1 is succeeded: "start" is allowed only from created, in_progress, requires_mfa',
    machine: 'refresh intent',
    id: 'ri_1',
    from: 'succeeded',
    change: 'start',
  });
  t.throws(() => transition('link', LINK_TRANSITIONS, 'expired', 'expire'), {
    message: 'link is expired: "expire" is allowed only from active',
  });
});

t.test('a refresh intent: started, waits for codes, ends once and stays ended', async (t) => {
  const states: IntentStatus[] = ['created', 'in_progress', 'requires_mfa', 'succeeded', 'failed'];
  const legal = moves('refresh intent', INTENT_TRANSITIONS, states).filter((move) => !move.endsWith('✗'));
  t.same(legal, [
    'created -start-> in_progress',
    'in_progress -start-> in_progress', // a worker takes over a job whose lease ran out
    'in_progress -await_mfa-> requires_mfa',
    'in_progress -complete-> succeeded',
    'in_progress -fail-> failed',
    'requires_mfa -start-> in_progress', // resumed with the code
    'requires_mfa -fail_mfa_wait-> failed',
  ]);
  for (const end of ['succeeded', 'failed'] as const)
    for (const change of Object.keys(INTENT_TRANSITIONS) as (keyof typeof INTENT_TRANSITIONS)[])
      t.throws(() => transition('refresh intent', INTENT_TRANSITIONS, end, change), IllegalTransitionError);
  t.throws(
    () => transition('refresh intent', INTENT_TRANSITIONS, 'created', 'complete'),
    IllegalTransitionError,
    'an intent never started cannot succeed',
  );
  t.throws(
    () => transition('refresh intent', INTENT_TRANSITIONS, 'requires_mfa', 'complete'),
    IllegalTransitionError,
    'an intent waiting for a code cannot succeed before a worker resumes it',
  );
});

t.test(
  'a link: expires only when active, reconnects only when expired, renews its consent from both',
  async (t) => {
    const states: LinkStatus[] = ['active', 'expired'];
    t.same(moves('link', LINK_TRANSITIONS, states), [
      'active -sync_succeeded-> active',
      'active -expire-> expired',
      'active -reconnect-> ✗',
      'active -reconnect_failed-> expired',
      'active -consent_ended-> expired',
      'active -consent_renewed-> active', // renewed early, while it still works
      'expired -sync_succeeded-> active',
      'expired -expire-> ✗',
      'expired -reconnect-> active',
      'expired -reconnect_failed-> ✗',
      'expired -consent_ended-> ✗',
      'expired -consent_renewed-> active',
    ]);
  },
);

t.test(
  'a job: claimed, then completed, failed, parked or deferred; a parked one is requeued or cancelled',
  async (t) => {
    const states: JobStatus[] = ['queued', 'running', 'waiting_mfa', 'succeeded', 'failed'];
    const legal = moves('job', JOB_TRANSITIONS, states).filter((move) => !move.endsWith('✗'));
    t.same(legal, [
      'queued -claim-> running',
      'queued -cancel-> failed',
      'running -claim-> running', // its lease ran out
      'running -complete-> succeeded',
      'running -fail-> failed',
      'running -park-> waiting_mfa',
      'running -defer-> queued', // the bank said when to come back (Retry-After)
      'running -cancel-> failed',
      'waiting_mfa -requeue-> queued',
      'waiting_mfa -cancel-> failed',
    ]);
    t.same(
      [...JOB_TRANSITIONS.cancel.from].sort(),
      [...ACTIVE_JOB_STATUSES].sort(),
      'a cancel reaches every job that holds its link (the partial unique index), and no other',
    );
  },
);

t.test('an account: refreshed from any state, removed only when active', async (t) => {
  const states: AccountStatus[] = ['active', 'removed'];
  t.same(moves('account', ACCOUNT_TRANSITIONS, states), [
    'active -refresh-> active',
    'active -remove-> removed',
    'removed -refresh-> active',
    'removed -remove-> ✗',
  ]);
});

t.test(
  'a widget session: follows one link at a time, may try again after a failure, finishes once',
  async (t) => {
    const states: SessionState[] = ['open', 'connecting', 'finished'];
    const legal = moves('widget session', SESSION_TRANSITIONS, states).filter((move) => !move.endsWith('✗'));
    t.same(legal, [
      'open -follow_link-> connecting',
      'connecting -fail-> open', // another password, another trip to the bank
      'connecting -fail_for_good-> finished', // the MFA tries spent, or the wait for a code over
      'connecting -finish-> finished',
    ]);
    for (const change of Object.keys(SESSION_TRANSITIONS) as (keyof typeof SESSION_TRANSITIONS)[])
      t.throws(
        () => transition('widget session', SESSION_TRANSITIONS, 'finished', change),
        IllegalTransitionError,
      );
    // The state is read from the row: it has no column of its own.
    t.equal(sessionState({ finished_at: null, refresh_intent_id: null }), 'open');
    t.equal(sessionState({ finished_at: null, refresh_intent_id: 'ri_1' }), 'connecting');
    t.equal(sessionState({ finished_at: AT, refresh_intent_id: 'ri_1' }), 'finished');
    t.equal(sessionState({ finished_at: AT, refresh_intent_id: null }), 'finished');
  },
);

const link = linkRowAt(AT, {
  mode: 'live',
  bank_id: 'bank_a',
  refresh_status: 'in_progress',
  sync_attempts: 4,
  sync_successes: 3,
  backfill_covered_from: 1000,
});
const failure = { failuresToExpire: 3, nextSyncAt: AT + 1 };

t.test(
  'a failed sync: only refused credentials count, and the third in a row expires an active link',
  async (t) => {
    const down = syncFailed(
      { ...link, consecutive_failures: 2 },
      { ...failure, errorCode: 'bank_unavailable' },
      AT,
    );
    t.same(down, {
      changes: {
        consecutive_failures: 2,
        last_error_code: 'bank_unavailable',
        refresh_status: 'idle',
        sync_attempts: 5,
        next_sync_at: AT + 1,
        updated_at: AT,
      },
      expires: false,
    });
    const second = syncFailed(
      { ...link, consecutive_failures: 1 },
      { ...failure, errorCode: 'rejected_credentials' },
      AT,
    );
    t.equal(second.expires, false);
    t.equal(second.changes.consecutive_failures, 2);
    const third = syncFailed(
      { ...link, consecutive_failures: 2 },
      { ...failure, errorCode: 'rejected_credentials' },
      AT,
    );
    t.equal(third.expires, true);
    t.match(third.changes, { status: 'expired', expired_at: AT, consecutive_failures: 3 });
    const again = syncFailed(
      { ...link, status: 'expired', consecutive_failures: 3 },
      { ...failure, errorCode: 'rejected_credentials' },
      AT,
    );
    t.equal(again.expires, false, 'an expired link does not expire twice');
    t.notOk('status' in again.changes);
  },
);

t.test('the first sync after a reconnect of an expired link: a refusal puts it back, silently', async (t) => {
  const before = AT - 86_400_000;
  const revoked = syncFailed(link, { ...failure, errorCode: 'consent_revoked', reconnectOf: before }, AT);
  t.equal(revoked.expires, false, 'no second link.expired');
  t.match(revoked.changes, { status: 'expired', expired_at: before, last_error_code: 'consent_revoked' });
  const refused = syncFailed(
    link,
    { ...failure, errorCode: 'rejected_credentials', reconnectOf: before },
    AT,
  );
  t.match(refused, { expires: false, changes: { status: 'expired', expired_at: before } });
  const down = syncFailed(link, { ...failure, errorCode: 'bank_unavailable', reconnectOf: before }, AT);
  t.notOk('status' in down.changes, 'a bank that is down says nothing of the new login: still active');
  const early = syncFailed(link, { ...failure, errorCode: 'consent_revoked', reconnectOf: null }, AT);
  t.match(
    early,
    { expires: true, changes: { status: 'expired', expired_at: AT } },
    'renewed early: it expires now',
  );
});

t.test('a successful sync: failures forgotten, the link active, backfill coverage only grows', async (t) => {
  const outcome = {
    holderName: null,
    accountsCount: null,
    newMovements: 4,
    nextSyncAt: AT + 1,
    backfillFrom: null,
  };
  const kept = syncSucceeded({ ...link, status: 'expired', consecutive_failures: 3 }, outcome, AT);
  t.match(kept, {
    status: 'active',
    holder_name: 'Ana',
    accounts_count: 2,
    new_movements_count: 4,
    consecutive_failures: 0,
    last_error_code: null,
    last_synced_at: AT,
    next_sync_at: AT + 1,
    refresh_status: 'idle',
    sync_attempts: 5,
    sync_successes: 4,
  });
  t.notOk('backfill_covered_from' in kept, 'no backfill: the coverage is not written');
  t.match(syncSucceeded(link, { ...outcome, holderName: 'Ana B', accountsCount: 3 }, AT), {
    holder_name: 'Ana B',
    accounts_count: 3,
  });
  t.equal(syncSucceeded(link, { ...outcome, backfillFrom: 500 }, AT).backfill_covered_from, 500);
  t.equal(syncSucceeded(link, { ...outcome, backfillFrom: 2000 }, AT).backfill_covered_from, 1000);
});
