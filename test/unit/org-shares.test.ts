import t from 'tap';
import {
  ACTIVE_MS,
  decidePermit,
  givenBack,
  readOrgCalls,
  withinShare,
  type OrgCallsByOrg,
  type Windows,
} from '../../src/banks/budget/org-shares.js';

/*
 * Each organisation's share of a bank's windows (issue 43, item 3; docs/open-finance.md, "Each organisation's
 * share"): max-min among the organisations calling the bank, with a newcomer's reserve for on-demand permits.
 */

const MINUTE = 1_788_000_000_000 - (1_788_000_000_000 % 60_000);
const ON_DEMAND = { perSecond: 10, perMinute: 60 };
const SCHEDULED = { perSecond: 8, perMinute: 48 };

/** Asks for permits for `org` every `stepMs` from `from` until `until` (or `max` granted); how many it got. */
function takeDuring(
  state: { windows: Windows; orgs: OrgCallsByOrg },
  org: string,
  share: { perSecond: number; perMinute: number },
  newcomer: boolean,
  window: { from: number; until: number; stepMs: number },
  max = Infinity,
): number {
  let taken = 0;
  for (let at = window.from; at < window.until && taken < max; at += window.stepMs) {
    const decision = decidePermit(state.windows, state.orgs, org, share, newcomer, at);
    if (!decision.granted) continue;
    state.windows = decision.windows;
    state.orgs = decision.orgs;
    taken += 1;
  }
  return taken;
}

const empty = (): { windows: Windows; orgs: OrgCallsByOrg } => ({
  windows: { second_start: 0, second_count: 0, minute_start: 0, minute_count: 0 },
  orgs: {},
});

t.test('the fair share among the organisations calling, and what one above it may still take', async (t) => {
  // 60 a minute on demand, one tenant alone: its fair share counts a newcomer (30), and above it the newcomer's
  // reserve (a fifth: 12) stays free.
  t.ok(withinShare({ limit: 60, total: 29, used: 29, others: [], newcomer: true }), 'below 30: served');
  t.ok(withinShare({ limit: 60, total: 47, used: 47, others: [], newcomer: true }), 'the 48th');
  t.notOk(withinShare({ limit: 60, total: 48, used: 48, others: [], newcomer: true }), 'not the 49th');
  t.ok(
    withinShare({ limit: 48, total: 47, used: 47, others: [], newcomer: false }),
    'a scheduled permit keeps no reserve: alone, the whole share',
  );
  // Two calling on demand: a fair share is 60 / 3 = 20.
  t.ok(
    withinShare({ limit: 60, total: 48, used: 0, others: [48], newcomer: true }),
    'the newcomer below its share is served while the window has room',
  );
  t.notOk(
    withinShare({ limit: 60, total: 49, used: 48, others: [1], newcomer: true }),
    'the busy one waits while the other has not had its 20 (19 unmet + 12 reserve > 11 left)',
  );
  t.ok(
    withinShare({ limit: 48, total: 29, used: 23, others: [6], newcomer: false }),
    'scheduled, two calling: 24 each, served below it',
  );
  t.notOk(
    withinShare({ limit: 48, total: 30, used: 24, others: [6], newcomer: false }),
    'and not into what the other has not used of its 24 (31 + 18 > 48)',
  );
  t.ok(
    withinShare({ limit: 48, total: 30, used: 24, others: [], newcomer: false }),
    'once the other has stopped calling, the rest',
  );
  t.notOk(withinShare({ limit: 60, total: 60, used: 0, others: [60], newcomer: true }), 'a full window');
});

t.test('a noisy tenant alone, then a quiet one: the quiet one has its calls at once', async (t) => {
  const state = empty();
  // The noisy tenant asks from the minute's first ms, every 50 ms, for 20 s.
  const noisy = takeDuring(state, 'org_noisy', ON_DEMAND, true, {
    from: MINUTE,
    until: MINUTE + 20_000,
    stepMs: 50,
  });
  t.equal(noisy, 48, 'alone, it leaves the newcomer 12 of the 60');
  t.equal(state.orgs.org_noisy!.all.second, 6, 'and 4 of each second’s 10');

  const arrives = MINUTE + 20_000;
  const quiet = takeDuring(
    state,
    'org_quiet',
    ON_DEMAND,
    true,
    { from: arrives, until: arrives + 2_000, stepMs: 50 },
    10,
  );
  t.equal(quiet, 10, 'the quiet tenant, arriving after, has the ten calls of a refresh at once');
  t.equal(
    takeDuring(state, 'org_noisy', ON_DEMAND, true, {
      from: arrives + 2_000,
      until: arrives + 2_500,
      stepMs: 50,
    }),
    0,
    'and the noisy one may not take the rest while the quiet one still calls',
  );
  const later = { from: arrives + 2_000 + ACTIVE_MS, until: arrives + 10_000, stepMs: 50 };
  t.equal(
    takeDuring(state, 'org_noisy', ON_DEMAND, true, later),
    0,
    'the minute’s last 2 stay free for a newcomer, even with the quiet one silent',
  );
  t.equal(takeDuring(state, 'org_third', ON_DEMAND, true, later), 2, 'and a third tenant has them');
});

t.test('every second keeps a refresh’s calls free for a tenant arriving in it', async (t) => {
  // Issue 43, item 3: the noisy tenant's scheduled syncs and refreshes ask at every ms of the second (its
  // workers wake together at its start); the quiet tenant's refresh of 4 calls (the accounts list and three
  // balances) is asked at 500 ms.
  const bank = { perSecond: 10, perMinute: 480 };
  const scheduled = { perSecond: 8, perMinute: 384 };
  const state = empty();
  const second = MINUTE + 7_000;
  let noisy = 0;
  for (let at = second; at < second + 500; at += 5) {
    for (const [share, onDemand] of [
      [scheduled, false],
      [bank, true],
    ] as const) {
      const decision = decidePermit(state.windows, state.orgs, 'org_noisy', share, onDemand, at, bank);
      if (!decision.granted) continue;
      state.windows = decision.windows;
      state.orgs = decision.orgs;
      noisy += 1;
    }
  }
  t.equal(noisy, 6, 'the noisy tenant alone takes 6 of the second, scheduled and on demand together');
  let quiet = 0;
  for (let at = second + 500; at < second + 800; at += 20) {
    // The noisy tenant asks again before each of the quiet one's calls.
    const again = decidePermit(state.windows, state.orgs, 'org_noisy', bank, true, at, bank);
    if (again.granted) ({ windows: state.windows, orgs: state.orgs } = again);
    const decision = decidePermit(state.windows, state.orgs, 'org_quiet', bank, true, at + 1, bank);
    if (!decision.granted || quiet === 4) continue;
    state.windows = decision.windows;
    state.orgs = decision.orgs;
    quiet += 1;
  }
  t.equal(quiet, 4, 'the quiet tenant’s refresh has its 4 calls in the second it is asked');
  t.equal(state.orgs.org_noisy!.all.second, 6, 'and the noisy one took none of them');
});

t.test('a refresh share another tenant cannot take is not kept from a refresh', async (t) => {
  // The remaining permit waits of bench/bank-fairness.ts: the noisy tenant's calls of the second were mostly
  // scheduled, so rule 2 kept free the refresh share it had not used, which rule 1 no longer let it take; the
  // quiet tenant's 4th call waited for the next second.
  const bank = { perSecond: 10, perMinute: 480 };
  const scheduled = { perSecond: 8, perMinute: 384 };
  const state = empty();
  const second = MINUTE + 7_000;
  const ask = (org: string, share: typeof bank, onDemand: boolean, at: number) => {
    const decision = decidePermit(state.windows, state.orgs, org, share, onDemand, at, bank);
    if (!decision.granted) return false;
    state.windows = decision.windows;
    state.orgs = decision.orgs;
    return true;
  };
  // The noisy tenant refreshed in the second before, and its scheduled syncs open this one.
  ask('org_noisy', bank, true, second - 200);
  let noisy = 0;
  for (let at = second; at < second + 300; at += 5) if (ask('org_noisy', scheduled, false, at)) noisy += 1;
  if (ask('org_noisy', bank, true, second + 300)) noisy += 1;
  t.equal(noisy, 6, 'the noisy tenant takes 6 of the second, one of them a refresh');
  let quiet = 0;
  for (let at = second + 500; at < second + 800 && quiet < 4; at += 20) {
    ask('org_noisy', bank, true, at); // the noisy tenant asks again before each of the quiet one's calls
    if (ask('org_quiet', bank, true, at + 1)) quiet += 1;
  }
  t.equal(quiet, 4, 'the quiet tenant’s refresh has its 4 calls in the second it is asked');
  t.equal(state.orgs.org_noisy!.all.second, 6, 'and the noisy one took none of them');
});

t.test('scheduled syncs alone keep 2 more of the second, and still have their whole minute', async (t) => {
  const bank = { perSecond: 10, perMinute: 60 };
  const state = empty();
  let perSecond = 0;
  let taken = 0;
  for (let at = MINUTE; at < MINUTE + 20_000; at += 10) {
    const decision = decidePermit(state.windows, state.orgs, 'org_a', SCHEDULED, false, at, bank);
    if (!decision.granted) continue;
    state.windows = decision.windows;
    state.orgs = decision.orgs;
    taken += 1;
    perSecond = Math.max(perSecond, state.windows.second_count);
  }
  t.equal(perSecond, 6, '6 of each second’s 10 (the scheduled share already leaves 2 of the 4)');
  t.equal(taken, 48, 'and all 48 of the minute’s scheduled share');
});

t.test('scheduled syncs of two tenants share the scheduled share evenly', async (t) => {
  const state = empty();
  let at = MINUTE;
  const taken = { a: 0, b: 0 };
  // Both keep asking, the big tenant twice as often.
  for (let step = 0; step < 600; step += 1, at += 40) {
    const org = step % 3 === 2 ? 'org_b' : 'org_a';
    const decision = decidePermit(state.windows, state.orgs, org, SCHEDULED, false, at);
    if (!decision.granted) continue;
    state.windows = decision.windows;
    state.orgs = decision.orgs;
    taken[org === 'org_a' ? 'a' : 'b'] += 1;
  }
  t.equal(taken.a + taken.b, 48, 'the minute gives its whole scheduled share');
  t.equal(taken.a, 24, 'half to the tenant that asks twice as often');
  t.equal(taken.b, 24, 'half to the other');
});

t.test(
  "a tenant whose scheduled syncs use their share still has its people's refreshes served",
  async (t) => {
    const state = empty();
    // Two tenants' scheduled syncs take the minute's scheduled share: 24 each.
    for (let step = 0, at = MINUTE; step < 200; step += 1, at += 50) {
      const decision = decidePermit(
        state.windows,
        state.orgs,
        step % 2 ? 'org_a' : 'org_b',
        SCHEDULED,
        false,
        at,
      );
      if (!decision.granted) continue;
      state.windows = decision.windows;
      state.orgs = decision.orgs;
    }
    t.equal(state.windows.minute_count, 48);
    // Then each has a person refreshing, their calls interleaved, from the 10th second.
    const got = { org_a: 0, org_b: 0 };
    for (let step = 0, at = MINUTE + 10_000; step < 80; step += 1, at += 25) {
      const org = step % 2 ? 'org_a' : 'org_b';
      const decision = decidePermit(state.windows, state.orgs, org, ON_DEMAND, true, at);
      if (!decision.granted) continue;
      state.windows = decision.windows;
      state.orgs = decision.orgs;
      got[org] += 1;
    }
    t.same(
      got,
      { org_a: 6, org_b: 6 },
      'the 12 calls left above the scheduled share go to their refreshes, 6 each',
    );
  },
);

t.test('in the minute, another tenant is kept only what it could take while it calls', async (t) => {
  // 480 a minute, 10 a second: a tenant that refreshed once (4 calls) is kept at most 30 of the minute (3 s of
  // whole seconds), not the 236 left of its fair 240, so the busy tenant may go on beyond its own 240.
  const share = { perSecond: 10, perMinute: 480 };
  const at = MINUTE + 40_000;
  const windows: Windows = { second_start: at, second_count: 0, minute_start: MINUTE, minute_count: 304 };
  const orgs: OrgCallsByOrg = {
    org_busy: { all: { second: 0, minute: 300, at: at - 100 } },
    org_quiet: { all: { second: 0, minute: 4, at: at - 500 } },
  };
  t.ok(decidePermit(windows, orgs, 'org_busy', share, false, at).granted, 'the busy tenant at 305 of 480');
  t.notOk(
    decidePermit({ ...windows, minute_count: 450 }, orgs, 'org_busy', share, false, at).granted,
    'but not into the last 30 while the other still calls',
  );
  t.ok(
    decidePermit({ ...windows, minute_count: 450 }, orgs, 'org_busy', share, false, at + ACTIVE_MS).granted,
    'and it may once the other has stopped calling',
  );
});

t.test('a second never holds more than its limit, whoever asks', async (t) => {
  const state = empty();
  const at = MINUTE + 5_000;
  const orgs = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l'];
  let granted = 0;
  for (const org of [...orgs, ...orgs]) {
    const decision = decidePermit(state.windows, state.orgs, org, ON_DEMAND, true, at);
    if (!decision.granted) continue;
    state.windows = decision.windows;
    state.orgs = decision.orgs;
    granted += 1;
  }
  t.equal(granted, 10, 'ten a second, among twelve tenants');
  t.equal(state.windows.second_count, 10);
});

t.test('a new second and a new minute count afresh; silent organisations are dropped', async (t) => {
  const state = empty();
  takeDuring(state, 'org_a', SCHEDULED, false, { from: MINUTE, until: MINUTE + 1000, stepMs: 200 });
  const next = decidePermit(state.windows, state.orgs, 'org_b', SCHEDULED, false, MINUTE + 61_000);
  t.ok(next.granted);
  if (!next.granted) return;
  t.equal(next.windows.minute_start, MINUTE + 60_000);
  t.equal(next.windows.minute_count, 1, 'the new minute holds the one call');
  t.same(
    Object.keys(next.orgs),
    ['org_b'],
    'the silent organisation of the last minute is gone from the row',
  );
});

t.test('a permit given back: one less for the bank and for its organisation', async (t) => {
  const state = empty();
  takeDuring(state, 'org_a', SCHEDULED, false, { from: MINUTE + 100, until: MINUTE + 500, stepMs: 10 }, 3);
  const back = givenBack(state.windows, state.orgs, 'org_a', false, MINUTE + 100);
  t.equal(back.windows.second_count, 2);
  t.equal(back.windows.minute_count, 2);
  t.same(back.orgs.org_a!.all, { second: 2, minute: 2, at: MINUTE + 120 });
  const later = givenBack(state.windows, state.orgs, 'org_a', false, MINUTE - 60_000);
  t.equal(later.windows.minute_count, 3, 'a permit of a past minute changes nothing of this one');
});

t.test('the stored counts: JSON, anything else read as none', async (t) => {
  t.same(readOrgCalls(null), {});
  t.same(readOrgCalls('not json'), {});
  t.same(readOrgCalls('{"org_a":{"all":{"second":1,"minute":2,"at":3}},"org_b":{"second":1}}'), {
    org_a: { all: { second: 1, minute: 2, at: 3 } },
  });
});
