import t from 'tap';
import {
  averagedCalls,
  capacityOf,
  inArrivalMargin,
  limitsOf,
  nextChance,
  shareOf,
  windowsAt,
} from '../../src/banks/budget/budget.js';
import { stretchOf } from '../../src/banks/budget/capacity.js';
import { checkBankBudgets } from '../../src/doctor/checks.js';

const DEFAULTS = {
  perSecond: 10,
  perMinute: 60,
  scheduledShare: 0.8,
  arrivalMarginMs: 200,
  consentStartShare: 0.25,
};

t.test(
  "a bank's limits: its own, else the draft's; scheduled syncs get their share, on demand all",
  async (t) => {
    t.same(limitsOf(DEFAULTS, {}, 'bancoabierto'), { perSecond: 10, perMinute: 60 });
    t.same(limitsOf(DEFAULTS, { bancoabierto: { perMinute: 30 } }, 'bancoabierto'), {
      perSecond: 10,
      perMinute: 30,
    });
    t.same(shareOf({ perSecond: 10, perMinute: 60 }, 'scheduled', 0.8), { perSecond: 8, perMinute: 48 });
    t.same(shareOf({ perSecond: 10, perMinute: 60 }, 'on_demand', 0.8), { perSecond: 10, perMinute: 60 });
    t.same(
      shareOf({ perSecond: 10, perMinute: 60 }, 'background', 0.8),
      { perSecond: 4, perMinute: 24 },
      'the background: half the scheduled share',
    );
    t.same(shareOf({ perSecond: 1, perMinute: 1 }, 'background', 0.8), { perSecond: 1, perMinute: 1 });
    t.same(
      shareOf({ perSecond: 1, perMinute: 1 }, 'scheduled', 0.5),
      { perSecond: 1, perMinute: 1 },
      'at least one',
    );
  },
);

t.test('when a refused permit may be had, and why', async (t) => {
  const now = Date.UTC(2026, 5, 15, 15, 0, 30, 400);
  const { second, minute } = windowsAt(now);
  const share = { perSecond: 2, perMinute: 12 };
  const state = (over: object) => ({
    second_start: second,
    second_count: 0,
    minute_start: minute,
    minute_count: 0,
    paused_until: null,
    paused_reason: null,
    ...over,
  });
  t.same(nextChance(state({ paused_until: now + 3000, paused_reason: 'HTTP 429' }), share, now), {
    at: now + 3000,
    cause: 'paused',
    reason: 'HTTP 429',
  });
  t.same(nextChance(state({ minute_count: 12 }), share, now), {
    at: minute + 60_000,
    cause: 'minute',
    reason: null,
  });
  t.same(nextChance(state({ second_count: 2 }), share, now), {
    at: second + 1000,
    cause: 'second',
    reason: null,
  });
  t.equal(
    nextChance(state({ paused_until: now - 1 }), share, now).cause,
    'margin',
    'a pause that ended is none',
  );
  t.equal(
    nextChance(state({ minute_start: minute - 60_000, minute_count: 12 }), share, now).cause,
    'margin',
    "last minute's count is not this minute's",
  );
  t.notOk(inArrivalMargin(now), '400 ms into a second: calls start');
  t.ok(inArrivalMargin(now + 450), '850 ms: the last 200 ms, no call starts');
  t.notOk(inArrivalMargin(now + 450, 0), 'unless the margin is 0');
});

t.test("a bank's links against its budget over the interval", async (t) => {
  const limits = { perSecond: 10, perMinute: 60 };
  // 48 calls a minute scheduled × 240 minutes = 11,520 calls an interval.
  const fits = capacityOf({
    links: 900,
    callsPerSync: 12,
    limits,
    scheduledShare: 0.8,
    intervalMinutes: 240,
  });
  t.same(fits, { needed: 10_800, available: 11_520, fits: true, minutesNeeded: 225 });
  const short = capacityOf({
    links: 1000,
    callsPerSync: 12,
    limits,
    scheduledShare: 0.8,
    intervalMinutes: 240,
  });
  t.equal(short.fits, false, '12,000 calls do not fit in 11,520');
  const averaged = capacityOf({
    links: 10_000,
    callsPerSync: averagedCalls(12, 12),
    limits,
    scheduledShare: 0.8,
    intervalMinutes: 240,
  });
  t.equal(
    averaged.needed,
    120_000,
    "an average of 12 calls that a float's last bit moved needs 120,000 calls",
  );
  // A bank that allows more a minute than its seconds do (600 = 10 × 60): a tenant alone keeps each second's
  // newcomer reserve free (6 of the 8 scheduled), so 360 scheduled calls a minute, not 480.
  const secondBound = capacityOf({
    links: 100,
    callsPerSync: 12,
    limits: { perSecond: 10, perMinute: 600 },
    scheduledShare: 0.8,
    intervalMinutes: 10,
  });
  t.equal(secondBound.available, 3_600, 'the seconds bind: 6 scheduled calls a second for 10 minutes');
  const check = checkBankBudgets(
    [
      {
        bankId: 'bancoabierto',
        mode: 'live',
        links: 1000,
        callsPerSync: 12,
        ...short,
        ...stretchOf(short, 12, 240),
      },
    ],
    240,
  );
  t.equal(check.status, 'warn');
  t.match(
    check.detail,
    /bancoabierto \(live\): 1000 links × 12\.0 calls a sync need 12000 calls .* allows 11520 in 240 minutes: a round takes 250 minutes, so every link of the bank is synced every 250 minutes instead/,
  );
  t.match(check.fix, /scheduler\.syncIntervalMinutes/);
  t.equal(checkBankBudgets([], 240).status, 'ok');
});
