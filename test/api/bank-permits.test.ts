import t from 'tap';
import type { Clock } from '../../src/clock/clock.js';
import { SyncPermits } from '../../src/banks/budget/permits.js';
import { ensureBudgetRow, findBudget } from '../../src/banks/budget/store.js';
import { forEachEngine, startTestApp, TEST_EPOCH } from '../helpers/harness.js';

/*
 * A permit is counted in the clock second it was asked in (docs/open-finance.md, "Bank limits"), and the call
 * must reach the bank within that second. On a loaded box the permit statement itself can wait for the
 * database (SQLite's one writer, busy with the other scheduler processes) until the second is nearly over:
 * CI saw 3 calls reach the bank in one second with a share of 2. Such a permit is given back unused; the call
 * takes one in the second it leaves in.
 */

const BANK = { bankId: 'bancoabierto', mode: 'test' as const };
const SECOND = TEST_EPOCH; // a whole second

/** Answers the given times in turn, then the last for ever: how long each step took is in the script. */
function scriptedClock(times: number[]): Clock {
  let next = 0;
  return { now: () => times[Math.min(next++, times.length - 1)]! };
}

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const permitsAt = (times: number[]) =>
    new SyncPermits(
      {
        db: app.db,
        clock: scriptedClock(times),
        limits: { perSecond: 4, perMinute: 24 },
        scheduledShare: 0.5,
        arrivalMarginMs: 200,
      },
      BANK,
      'org_permits',
      'scheduled',
    );

  t.test('a permit granted in time is used in its second', async (t) => {
    await ensureBudgetRow(app.db, BANK, SECOND);
    const permits = permitsAt([SECOND + 100, SECOND + 130]);
    await permits.take();
    const row = await findBudget(app.db.knex, BANK);
    t.equal(Number(row!.second_start), SECOND);
    t.equal(Number(row!.second_count), 1);
    t.same({ calls: permits.calls, late: permits.late }, { calls: 1, late: 0 });
  });

  t.test("a permit the database granted past its second's margin is not used", async (t) => {
    const second = SECOND + 60_000; // a minute of its own, so the counts start at zero
    await ensureBudgetRow(app.db, BANK, second);
    // Asked at 700 ms; the statement came back at 950 ms, in the margin; the next at 1,050 ms, back at 1,100.
    const permits = permitsAt([second + 700, second + 950, second + 1050, second + 1100]);
    await permits.take();
    const row = await findBudget(app.db.knex, BANK);
    t.equal(Number(row!.second_start), second + 1000, 'the call is counted in the second it leaves in');
    t.equal(Number(row!.second_count), 1);
    t.equal(
      Number(row!.minute_count),
      1,
      'the late permit was given back: the minute counts the one call made, so no permit of the budget is wasted',
    );
    t.same({ calls: permits.calls, late: permits.late }, { calls: 1, late: 1 });
  });
});
