import t, { type Test } from 'tap';
import { setTimeout as sleep } from 'node:timers/promises';
import { sandboxCustomerData } from '../../src/test-mode/sandbox-customer-data.js';
import {
  bankCalls,
  budgetAppliance,
  budgetEnv,
  busiest,
  minuteOf,
  queueScheduled,
  scheduledLeft,
  untilMinuteHasLeft,
} from '../helpers/bank-budget.js';
import type { BankFixture } from '../helpers/consent-bank.js';
import { startServe, waitFor } from '../helpers/cli.js';
import { startWorkers } from '../helpers/serve-roles.js';
import { RAISED_LIMITS, createTenant, forEachEngine, setTimeLimit } from '../helpers/harness.js';

/*
 * Each organisation's fair share of a bank's budget (issue 43, item 3; docs/open-finance.md, "Bank limits"):
 * two organisations hold consent links at the same simulated bank, one noisy (many links), one quiet (a few).
 * Two `svc serve --roles scheduler` processes and one `--roles api` on one database sync them; the bank runs
 * in this test process (the bank boundary) and logs when each call reached it. What is checked is what the
 * quiet tenant and the operator would see: the quiet organisation's refresh is not queued behind the noisy
 * one's (nor its scheduled syncs), the noisy one still gets most of what the bank allows when it is alone,
 * the bank's busiest second and minute stay within its limits, and every sync succeeds in the end.
 *
 * The behaviour (max-min, src/banks/budget/org-shares.ts): in each window (second, minute) of the bank's
 * budget for a priority, an organisation below its fair share is served while the window has room; one above
 * it only while the window keeps free the unmet fair shares of the other organisations calling the bank; a
 * refresh's calls are also shared among the organisations refreshing, with a fifth of the window kept for an
 * organisation that has not refreshed yet. A claim takes first the job of the organisation with the fewest
 * running at its bank, and a spare worker takes a refresh of an organisation with nothing running there.
 *
 * Budget (BUDGET below): 8 calls a second and 40 a minute; scheduled syncs may use half, 4 a second and 20 a
 * minute. A fifth of a window kept for a newcomer is 8 calls of the minute on demand and 4 of the scheduled
 * minute. Each link's consent reads accounts and balances, and the holders here have three deposit accounts:
 * an on-demand refresh or a link's first sync is 4 calls (the accounts list and a balance each; measured).
 * The links are made at the start, and an access token of the simulated bank lives 10 minutes, so no sync of
 * the file needs a token refresh.
 *
 * The minute is what this file is about; the second is wide (4 scheduled calls a second for two workers that
 * call one at a time) so that a sync's first call seldom waits longer than the second it may wait before
 * being deferred. With 2 a second, first calls were deferred now and then, and a deferred job goes behind
 * jobs queued after it: today's queue order, and so the "before", became a matter of chance (measured: one
 * quiet sync of two got its first calls in the noisy minute on SQLite, none on PostgreSQL).
 *
 * The subtests run scheduled, then on demand, then work-conserving: the scheduled one needs a minute no other
 * call has touched (it is first, right after set-up), the on-demand one does not (its budget is the whole
 * minute), and the work-conserving one needs a whole clean minute again, so it waits for one at the end: one
 * idle wait instead of two. About 4 minutes an engine.
 *
 * Both engines: on SQLite the processes of one box share one file; on PostgreSQL they could be on two hosts.
 */
setTimeLimit(t, 1_500_000);

const BUDGET = { perSecond: 8, perMinute: 40, scheduledShare: 0.5 };
const SCHEDULED = { perSecond: 4, perMinute: 20 };
const ACTIONS = ['ReadAccounts', 'ReadBalances'];
/** Sandbox users with three deposit accounts each, one per organisation: the bank's log tells them apart. */
const NOISY_RUT = '11.111.111-1';
const QUIET_RUT = '12.345.678-5';

// Two workers a process: the noisy organisation's syncs take the bank's place in both processes, so the quiet
// organisation's sync gets a worker only through the spare an organisation with nothing running there may claim.
const ENV = budgetEnv(BUDGET);

/** The bank's ids of a sandbox holder's deposit accounts (its balance calls name them; a card has none). */
function accountIdsOf(rut: string): Set<string> {
  return new Set(
    sandboxCustomerData()
      .accounts(rut.replace(/\./g, ''), Date.now())
      .filter((account) => account.product !== 'credit_card')
      .map((account) => account.id),
  );
}

/** The calls since `from` naming one of the holder's accounts: what the bank can tell of whose call it was. */
function callsOfHolder(fixture: BankFixture, rut: string, from: number): { at: number; path: string }[] {
  const ids = accountIdsOf(rut);
  return bankCalls(fixture, from).filter((call) => {
    const id = /\/accounts\/([^/]+)\/balances$/.exec(call.path)?.[1];
    return id !== undefined && ids.has(id);
  });
}

function secondsLeftInMinute(at: number): number {
  return Math.round((60_000 - (at % 60_000)) / 100) / 10;
}

forEachEngine(t, async (t, engine) => {
  const { installed, fixture, config, db, clock, newLink } = await budgetAppliance(t, engine, ACTIONS);
  // Two tenants, each with its own secret key; their API rate limits are out of the way (the noisy one asks
  // for a dozen refreshes at once).
  const noisyOrg = await createTenant({ db, clock, config }, { rateLimits: RAISED_LIMITS });
  const quietOrg = await createTenant({ db, clock, config }, { rateLimits: RAISED_LIMITS });
  const noisyKey = noisyOrg.keys.sk_test.secret;
  const quietKey = quietOrg.keys.sk_test.secret;

  const newLinks = async (orgId: string, rut: string, count: number) => {
    const ids: string[] = [];
    for (let i = 0; i < count; i++) ids.push(await newLink(orgId, rut));
    return ids;
  };
  // Links of each subtest's own, so that one subtest's leftovers never decide another's.
  const scheduledNoisy = await newLinks(noisyOrg.orgId, NOISY_RUT, 6);
  const scheduledQuiet = await newLinks(quietOrg.orgId, QUIET_RUT, 2);
  const refreshNoisy = await newLinks(noisyOrg.orgId, NOISY_RUT, 12);
  const [refreshQuiet] = await newLinks(quietOrg.orgId, QUIET_RUT, 1);
  const aloneNoisy = await newLinks(noisyOrg.orgId, NOISY_RUT, 6);

  const [api] = await Promise.all([
    startServe(t, { home: installed.home, args: ['--roles', 'api'], env: ENV }),
    startWorkers(t, { home: installed.home, roles: 'scheduler', env: ENV }),
    startWorkers(t, { home: installed.home, roles: 'scheduler', env: ENV }),
  ]);
  // Everything the processes call from here on (the set-up's consent trips reached the bank too, outside the
  // budget, as a person's browser and the test's own client).
  const since = Date.now();
  const withinBankLimits = (t: Test, what: string) => {
    const calls = bankCalls(fixture, since);
    const perSecond = busiest(calls, 1000);
    const perMinute = busiest(calls, 60_000);
    t.ok(
      perSecond <= BUDGET.perSecond,
      `${what}: at most ${BUDGET.perSecond} calls in any second (${perSecond})`,
    );
    t.ok(
      perMinute <= BUDGET.perMinute,
      `${what}: at most ${BUDGET.perMinute} calls in any minute (${perMinute})`,
    );
  };

  t.test(
    "scheduled: the quiet organisation's syncs are served in the first minute, not after the noisy one's",
    async (t) => {
      /*
       * Six noisy links (24 calls: more than the scheduled 20 of a minute) and two quiet ones (8 calls),
       * queued together at the start of a minute, the noisy organisation's first: the tick queues a bank's
       * due links in one go, and the quiet ones coming last is the worst case for them (today's queue serves
       * jobs in the order they fell due, so the noisy organisation's five first syncs spend the minute's 20
       * and the quiet ones wait for the next minute, behind what is left of the noisy ones).
       *
       * Fair: both organisations are active, so the noisy one, above its fair share (a half of the 20, or of
       * the 16 left beside the newcomers' reserve: 8 to 10), may only take calls while the minute keeps the
       * quiet one's unmet share and the reserve free; the quiet one needs 8 calls, within its share under
       * either reading, and gets a worker at once (the spare). So all of its calls reach the bank in the
       * minute they were queued in (at 4 a second shared with the noisy syncs: a few seconds idle, well under
       * the 45 s or more of the minute left when they are queued, even on a loaded box).
       */
      await untilMinuteHasLeft(45_000);
      const from = Date.now();
      const minute = minuteOf(from);
      const noisyJobs = await queueScheduled(db, scheduledNoisy);
      const quietJobs = await queueScheduled(db, scheduledQuiet);
      t.equal(noisyJobs.length + quietJobs.length, 8, 'eight scheduled syncs queued');

      const quietDone = await waitFor(
        async () => ((await scheduledLeft(db, scheduledQuiet)) === 0 ? Date.now() : undefined),
        180_000,
        250,
      );
      t.ok(quietDone, "the quiet organisation's scheduled syncs finished");
      const quietCalls = callsOfHolder(fixture, QUIET_RUT, from);
      t.equal(
        quietCalls.length,
        2 * accountIdsOf(QUIET_RUT).size,
        'the bank saw a balance call per quiet account',
      );
      const quietLast = Math.max(...quietCalls.map((c) => c.at));
      t.comment(
        `quiet syncs done ${quietDone! - from} ms after queueing; its calls at +${quietCalls.map((c) => c.at - from).join(', +')} ms (minute ends at +${minute + 60_000 - from} ms)`,
      );
      t.ok(
        quietCalls.every((c) => minuteOf(c.at) === minute),
        `every call of the quiet organisation reached the bank in the minute its syncs were queued in (last at +${quietLast - from} ms, the minute ended at +${minute + 60_000 - from} ms)`,
      );

      const allDone = await waitFor(
        async () => ((await scheduledLeft(db, scheduledNoisy)) === 0 ? Date.now() : undefined),
        240_000,
        250,
      );
      t.ok(allDone, "every noisy organisation's scheduled sync finished too");
      const noisyCalls = callsOfHolder(fixture, NOISY_RUT, from);
      const noisyLast = Math.max(...noisyCalls.map((c) => c.at));
      t.comment(
        `noisy syncs done ${allDone! - from} ms after queueing (last call at +${noisyLast - from} ms)`,
      );
      t.ok(
        quietLast < noisyLast,
        `the quiet organisation was done before the noisy one (+${quietLast - from} ms against +${noisyLast - from} ms)`,
      );
      const jobs = await db
        .knex('jobs')
        .whereIn('link_id', [...scheduledNoisy, ...scheduledQuiet])
        .select('status');
      t.ok(
        jobs.every((job) => job.status === 'succeeded'),
        `all ${jobs.length} syncs succeeded: waiting for a share never failed one`,
      );
      const calls = bankCalls(fixture, from);
      const perSecond = busiest(calls, 1000);
      const perMinute = busiest(calls, 60_000);
      t.ok(
        perSecond <= SCHEDULED.perSecond,
        `scheduled syncs: at most ${SCHEDULED.perSecond} calls in any second (${perSecond})`,
      );
      t.ok(
        perMinute <= SCHEDULED.perMinute,
        `scheduled syncs: at most ${SCHEDULED.perMinute} calls in any minute (${perMinute})`,
      );
    },
  );

  t.test("on demand: the quiet organisation's refresh is not queued behind the noisy one's", async (t) => {
    /*
     * The noisy organisation asks for refreshes of 12 links at once: 48 calls, more than the minute's 40
     * (today it spends the whole minute and the rest waits for the next; fair, alone, it may use 32 and the
     * rest waits). Once the bank is busy with them (12 calls), the quiet organisation asks for one refresh: 4
     * calls.
     *
     * Today: both processes' on-demand place at the bank is held by a noisy refresh, and the jobs are claimed
     * in the order they were asked, so the quiet refresh waits for every noisy refresh asked before it; by
     * then the noisy ones have spent the minute, so it waits for the next minute (it is asked with 30 s or
     * more of the minute left: at least 30 s, more with its place among the deferred ones).
     *
     * Fair: the quiet organisation has nothing running at the bank, so a spare worker claims its job within a
     * poll (100 ms); it is a newcomer below its fair share, and the minute keeps at least its 8-call reserve
     * free of the noisy organisation's calls, so its 4 calls go at once (8 a second). About 1-2 s idle. The
     * bound is 20 s: ten times that, for a loaded 2-core machine where three processes share one SQLite file
     * (work of a second or two has been seen to take ten times as long there: HANG_GUARD_MS), and still well
     * under the 30 s and more it waits today.
     */
    await untilMinuteHasLeft(45_000);
    const from = Date.now();
    const answers = [];
    for (const linkId of refreshNoisy)
      answers.push(
        await api!.request('POST', '/v1/refresh_intents', { key: noisyKey, body: { link_id: linkId } }),
      );
    t.same(
      answers.map((answer) => answer.status),
      refreshNoisy.map(() => 200),
      `the noisy organisation asked for ${refreshNoisy.length} refreshes`,
    );
    const asked: string[] = answers.map((answer) => answer.body?.id);
    const busy = await waitFor(
      async () => (bankCalls(fixture, from).length >= 12 ? true : undefined),
      30_000,
    );
    t.ok(busy, 'the bank is busy with the noisy refreshes (12 calls)');

    const askedAt = Date.now();
    const refresh = await api!.request('POST', '/v1/refresh_intents', {
      key: quietKey,
      body: { link_id: refreshQuiet },
    });
    t.equal(
      refresh.status,
      200,
      refresh.status === 200 ? 'the quiet organisation asked for a refresh' : refresh.text,
    );
    t.comment(
      `the quiet refresh asked ${askedAt - from} ms after the noisy ones, with ${secondsLeftInMinute(askedAt)} s of the minute left and ${bankCalls(fixture, from).length} noisy calls made`,
    );
    // Polled well past the bound, so that a run that misses it says by how much.
    const done = await waitFor(async () => {
      const intent = await api!.request('GET', `/v1/refresh_intents/${refresh.body.id}`, { key: quietKey });
      if (intent.body.status !== 'succeeded' && intent.body.status !== 'failed') return undefined;
      return { status: intent.body.status as string, at: Date.now() };
    }, 150_000);
    t.equal(done?.status, 'succeeded', "the quiet organisation's refresh succeeded");
    const took = (done?.at ?? Date.now()) - askedAt;
    t.ok(took <= 20_000, `within 20 s of being asked (${took} ms)`);

    const noisyDone = await waitFor(
      async () => {
        for (const id of asked) {
          const intent = await api!.request('GET', `/v1/refresh_intents/${id}`, { key: noisyKey });
          if (intent.body.status !== 'succeeded' && intent.body.status !== 'failed') return undefined;
        }
        return Date.now();
      },
      240_000,
      500,
    );
    t.ok(noisyDone, 'every noisy refresh finished');
    const statuses = await Promise.all(
      asked.map(
        async (id) => (await api!.request('GET', `/v1/refresh_intents/${id}`, { key: noisyKey })).body.status,
      ),
    );
    t.same(
      statuses.filter((status) => status !== 'succeeded'),
      [],
      `all ${asked.length} noisy refreshes succeeded (the last ${noisyDone! - from} ms after they were asked)`,
    );

    const quietCalls = callsOfHolder(fixture, QUIET_RUT, from);
    const noisyCalls = callsOfHolder(fixture, NOISY_RUT, from);
    t.ok(quietCalls.length > 0, 'the bank saw the quiet refresh');
    const quietLast = Math.max(...quietCalls.map((c) => c.at));
    const noisyAfter = noisyCalls.filter((c) => c.at > quietLast).length;
    t.ok(
      noisyAfter > 0,
      `the bank saw the quiet organisation's calls while the noisy queue was still being served (${noisyAfter} noisy balance calls after its last, at +${quietLast - from} ms)`,
    );
    withinBankLimits(t, 'everything the processes called so far');
  });

  t.test('work-conserving: the noisy organisation alone uses most of the scheduled share', async (t) => {
    /*
     * Six noisy links queued as scheduled syncs (24 calls, more than the scheduled 20 of a minute), the quiet
     * organisation idle, at the start of a minute no other call touched. Fair: alone, the noisy organisation
     * may use all but the newcomers' reserve: 20 - 4 = 16 (80%); today all 20. Asserted: at least 70% (14),
     * which leaves room for the reserve being a little more than a fifth, and at most the share, with calls
     * left for the next minute (it had more to do than it was allowed).
     */
    await untilMinuteHasLeft(60_000); // the next minute's start: the last one held the refreshes' calls
    const from = Date.now();
    const minute = minuteOf(from);
    await queueScheduled(db, aloneNoisy);
    await sleep(minute + 60_000 - Date.now() + 200);
    const inMinute = bankCalls(fixture, from).filter((c) => minuteOf(c.at) === minute).length;
    t.comment(`the noisy organisation alone made ${inMinute} calls in the minute`);
    t.ok(
      inMinute >= Math.ceil(0.7 * SCHEDULED.perMinute),
      `it used at least 70% of the scheduled ${SCHEDULED.perMinute} (${inMinute})`,
    );
    t.ok(inMinute <= SCHEDULED.perMinute, `and no more than the scheduled share (${inMinute})`);

    const finished = await waitFor(
      async () => ((await scheduledLeft(db, aloneNoisy)) === 0 ? true : undefined),
      150_000,
      250,
    );
    t.ok(finished, 'every scheduled sync finished');
    const later = bankCalls(fixture, from).filter((c) => minuteOf(c.at) > minute).length;
    t.ok(later > 0, `it had more to do than the minute allowed: ${later} calls went in the next minute`);
    const jobs = await db.knex('jobs').whereIn('link_id', aloneNoisy).select('status');
    t.ok(
      jobs.every((job) => job.status === 'succeeded'),
      `all ${jobs.length} syncs succeeded`,
    );
    withinBankLimits(t, 'everything the processes called');
  });
});
