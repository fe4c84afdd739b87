import t from 'tap';
import { defaultConfig } from '../../src/config/defaults.js';
import { DATABASE_RETRY_CAP_MS } from '../../src/db/errors.js';
import { afterAttempt, ownRetryDelayMs } from '../../src/webhooks/dispatch/retry-policy.js';

const SCHEDULE = defaultConfig('/tmp').dispatcher.retryScheduleSeconds;
const END = Date.UTC(2026, 5, 15, 15, 0, 0);

t.test(
  'the default schedule is the one the docs give: six attempts, 0, 1 min, 5 min, 30 min, 2 h, 6 h',
  async (t) => {
    t.same(SCHEDULE, [0, 60, 300, 1800, 7200, 21600]);
  },
);

t.test('a failed attempt is retried after the next delay of the schedule, from its end', async (t) => {
  const delays = [0, 1, 2, 3, 4].map((before) => afterAttempt(before, false, END, SCHEDULE));
  t.same(
    delays.map((step) => step.status),
    ['pending', 'pending', 'pending', 'pending', 'pending'],
  );
  t.same(
    delays.map((step) => step.attempts),
    [1, 2, 3, 4, 5],
    'the attempt just made is counted',
  );
  t.same(
    delays.map((step) => (step.nextAttemptAt! - END) / 1000),
    [60, 300, 1800, 7200, 21600],
  );
});

t.test('the last attempt of the schedule failing ends the series: failed, nothing due', async (t) => {
  t.same(afterAttempt(5, false, END, SCHEDULE), { status: 'failed', attempts: 6, nextAttemptAt: null });
  t.same(
    afterAttempt(0, false, END, [0]),
    { status: 'failed', attempts: 1, nextAttemptAt: null },
    'one attempt',
  );
});

t.test('a success ends the series at any attempt, the last included', async (t) => {
  for (const before of [0, 3, 5]) {
    t.same(afterAttempt(before, true, END, SCHEDULE), {
      status: 'succeeded',
      attempts: before + 1,
      nextAttemptAt: null,
    });
  }
});

t.test('delays may be fractions of a second or zero (tests, drills)', async (t) => {
  t.equal(afterAttempt(0, false, END, [0, 0.25, 0]).nextAttemptAt, END + 250);
  t.equal(afterAttempt(1, false, END, [0, 0.25, 0]).nextAttemptAt, END, 'due at once');
});

t.test("the dispatcher's own failures back off by doubling, up to the database retry cap", async (t) => {
  t.same(
    [1, 2, 3, 4].map((failures) => ownRetryDelayMs(failures, 100)),
    [200, 400, 800, 1600],
  );
  t.equal(ownRetryDelayMs(60, 500), DATABASE_RETRY_CAP_MS, 'capped, however many');
});
