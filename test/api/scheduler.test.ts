import t from 'tap';
import { newId } from '../../src/ids/ids.js';
import { claimJob, insertJobs, syncJob } from '../../src/jobs/jobs.js';
import { firstSyncAt } from '../../src/links/schedule.js';
import { enqueueDueLinks } from '../../src/scheduler/enqueue-due.js';
import { openDatabase } from '../../src/db/database.js';
import { forEachEngine, startTestApp, TEST_EPOCH } from '../helpers/harness.js';

const INTERVAL = 4 * 3_600_000;

t.test('link phases spread evenly over the interval', async (t) => {
  const buckets = new Array<number>(24).fill(0);
  let outside = 0;
  for (let i = 0; i < 24_000; i++) {
    const at = firstSyncAt(newId('link'), TEST_EPOCH, INTERVAL);
    if (at < TEST_EPOCH + INTERVAL / 2 || at >= TEST_EPOCH + (3 * INTERVAL) / 2) outside += 1;
    else buckets[Math.floor(((at - TEST_EPOCH - INTERVAL / 2) / INTERVAL) * 24)]! += 1;
  }
  t.equal(outside, 0, 'the first sync falls between half an interval and one and a half intervals away');
  t.ok(
    buckets.every((n) => n > 800 && n < 1200),
    `every 10-minute slot holds about 1,000 of 24,000 links (${buckets.join(', ')})`,
  );
});

/** An active link row of `orgId` due at `dueAt`, written straight to the table: the scheduler reads no more. */
function linkRow(orgId: string, dueAt: number, extra: Record<string, unknown> = {}) {
  return {
    id: newId('link'),
    org_id: orgId,
    mode: 'test',
    bank_id: 'bancochile',
    holder_type: 'individual',
    status: 'active',
    credentials_encrypted: 'x',
    next_sync_at: dueAt,
    created_at: TEST_EPOCH,
    updated_at: TEST_EPOCH,
    ...extra,
  };
}

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  // A second handle on the same database: another scheduler process.
  const second = openDatabase({ url: app.config.databaseUrl });
  t.teardown(() => second.close());
  const orgId = newId('org');
  await app.db.knex('organisations').insert({ id: orgId, name: 'scheduler', created_at: TEST_EPOCH });
  const links = Array.from({ length: 300 }, () => linkRow(orgId, TEST_EPOCH - 1000));
  for (let i = 0; i < links.length; i += 100) await app.db.knex('links').insert(links.slice(i, i + 100));

  t.test('two schedulers firing the same tick queue it once', async (t) => {
    const [a, b] = await Promise.all([
      enqueueDueLinks(app.db, TEST_EPOCH, INTERVAL),
      enqueueDueLinks(second, TEST_EPOCH + 5, INTERVAL),
    ]);
    t.same(
      [a, b].sort((x, y) => x - y),
      [0, 300],
      'one queued all 300, the other nothing',
    );
    const perLink = await app.db.knex('jobs').groupBy('link_id').select('link_id').count({ n: '*' });
    t.equal(perLink.length, 300);
    t.ok(
      perLink.every((row) => Number((row as { n: number | string }).n) === 1),
      'one job per link',
    );
    t.equal(
      await enqueueDueLinks(app.db, TEST_EPOCH + 60_000, INTERVAL),
      0,
      'the next tick finds nothing due',
    );
  });

  t.test('concurrent claimers never take the same job, and an expired lease is taken over', async (t) => {
    // The jobs are due at the winning scheduler's clock above, TEST_EPOCH or 5 ms later (either may win).
    const now = TEST_EPOCH + 5;
    const claimed: string[] = [];
    const claimer = async (db: typeof app.db, owner: string) => {
      for (;;) {
        const job = await claimJob(db, owner, now, 60_000);
        if (!job) return;
        claimed.push(job.id);
      }
    };
    await Promise.all([
      claimer(app.db, 'a1'),
      claimer(app.db, 'a2'),
      claimer(second, 'b1'),
      claimer(second, 'b2'),
    ]);
    t.equal(claimed.length, 300, 'every job claimed');
    t.equal(new Set(claimed).size, 300, 'none claimed twice');
    t.equal(await claimJob(app.db, 'late', now + 59_000, 60_000), null, 'nothing while the leases hold');
    const taken = await claimJob(second, 'rescuer', now + 61_000, 60_000);
    t.ok(taken, 'a job whose lease expired is claimed again');
    t.equal(taken?.attempts, 2);
    t.equal(taken?.locked_by, 'rescuer');
  });

  t.test('a second active sync job for a link is refused by the database', async (t) => {
    const link = links[0]!;
    await app.db.knex('jobs').where({ link_id: link.id }).update({ status: 'succeeded' });
    await app.db
      .knex('jobs')
      .insert(syncJob(link, { refresh_type: 'scheduled', interactive: false }, TEST_EPOCH));
    await t.rejects(
      app.db.knex('jobs').insert(syncJob(link, { refresh_type: 'only_last', interactive: true }, TEST_EPOCH)),
      'the partial unique index holds',
    );
  });
});

/*
 * The tick's guarantees at its bound: of more due links than one tick takes (5,000), it queues the ones that
 * fell due first; a link with a sync already queued, running or waiting for MFA keeps that one job and its
 * due time; paused, expired and not-yet-due links are left alone; the next tick takes the rest.
 */
forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const orgId = newId('org');
  await app.db.knex('organisations').insert({ id: orgId, name: 'backlog', created_at: TEST_EPOCH });
  const link = (dueAt: number, extra: Record<string, unknown> = {}) =>
    linkRow(orgId, dueAt, { paused: false, ...extra });
  // 5,100 due a second apart, the earliest ten hours ago; inserted in no particular order.
  const due = Array.from({ length: 5_100 }, (_, i) => link(TEST_EPOCH - 36_000_000 + i * 1_000));
  const busy = [due[0]!, due[1]!, due[2]!];
  const paused = link(TEST_EPOCH - 40_000_000, { paused: true, paused_at: TEST_EPOCH });
  const expired = link(TEST_EPOCH - 40_000_000, { status: 'expired' });
  const notYet = link(TEST_EPOCH + 120_000);
  const all = [...due, paused, expired, notYet].sort((a, b) => a.id.localeCompare(b.id));
  for (let i = 0; i < all.length; i += 100) await app.db.knex('links').insert(all.slice(i, i + 100));
  const busyStatuses = ['queued', 'running', 'waiting_mfa'] as const;
  for (const [i, status] of busyStatuses.entries())
    await app.db
      .knex('jobs')
      .insert({ ...syncJob(busy[i]!, { refresh_type: 'only_last', interactive: true }, TEST_EPOCH), status });

  const jobsOf = async () => {
    const rows: { link_id: string; n: number | string }[] = await app.db
      .knex('jobs')
      .groupBy('link_id')
      .select('link_id')
      .count({ n: '*' });
    return new Map(rows.map((row) => [row.link_id, Number(row.n)]));
  };

  t.equal(await enqueueDueLinks(app.db, TEST_EPOCH, INTERVAL), 5_000, 'one tick queues its bound, 5,000');
  let jobs = await jobsOf();
  const firstFive = due.slice(3, 5_003);
  t.ok(
    firstFive.every((row) => jobs.get(row.id) === 1),
    'the 5,000 that fell due first (after the busy ones) each have one job',
  );
  t.ok(
    due.slice(5_003).every((row) => !jobs.has(row.id)),
    'the 97 that fell due last wait for the next tick',
  );
  t.ok(
    busy.every((row) => jobs.get(row.id) === 1),
    'a link with a sync queued, running or waiting for MFA keeps its one job',
  );
  t.notOk(
    jobs.has(paused.id) || jobs.has(expired.id) || jobs.has(notYet.id),
    'paused, expired, not yet due: none',
  );

  const rows: { id: string; next_sync_at: number; refresh_status: string }[] = await app.db
    .knex('links')
    .whereIn('id', [firstFive[0]!.id, firstFive[4_999]!.id, busy[0]!.id, due[5_099]!.id])
    .select('id', 'next_sync_at', 'refresh_status');
  const byId = new Map(rows.map((row) => [row.id, row]));
  for (const queued of [firstFive[0]!, firstFive[4_999]!]) {
    t.equal(
      Number(byId.get(queued.id)!.next_sync_at),
      TEST_EPOCH + INTERVAL,
      'a queued link is due an interval on',
    );
    t.equal(byId.get(queued.id)!.refresh_status, 'queued');
  }
  t.equal(
    Number(byId.get(busy[0]!.id)!.next_sync_at),
    busy[0]!.next_sync_at,
    'a busy link keeps its due time',
  );
  t.equal(Number(byId.get(due[5_099]!.id)!.next_sync_at), due[5_099]!.next_sync_at, 'a waiting one too');

  t.equal(await enqueueDueLinks(app.db, TEST_EPOCH + 60_000, INTERVAL), 97, 'the next tick queues the rest');
  jobs = await jobsOf();
  t.ok(
    due.every((row) => jobs.get(row.id) === 1),
    'every due link has exactly one job',
  );
  t.notOk(jobs.has(paused.id) || jobs.has(expired.id) || jobs.has(notYet.id), 'and still none of the others');
});

forEachEngine(t, async (t, engine) => {
  t.test(
    'a claim takes first the job of the organisation with the fewest running at its bank, then the one due first (issue 43, item 3)',
    async (t) => {
      const app = await startTestApp(t, engine);
      const orgs = { big: newId('org'), small: newId('org') };
      for (const [name, id] of Object.entries(orgs))
        await app.db.knex('organisations').insert({ id, name, created_at: TEST_EPOCH });
      // The big tenant's ten scheduled syncs fell due a minute before the small tenant's two.
      const big = Array.from({ length: 10 }, () => linkRow(orgs.big, TEST_EPOCH - 60_000));
      const small = Array.from({ length: 2 }, () => linkRow(orgs.small, TEST_EPOCH));
      await app.db.knex('links').insert([...big, ...small]);
      const scheduled = { refresh_type: 'scheduled' as const, interactive: false };
      await insertJobs(app.db.knex, [
        ...big.map((link, i) => syncJob(link, scheduled, TEST_EPOCH - 60_000 + i)),
        ...small.map((link, i) => syncJob(link, scheduled, TEST_EPOCH + i)),
      ]);
      const whose = new Map([...big, ...small].map((link) => [link.id, link.org_id]));
      const claims: string[] = [];
      for (let i = 0; i < 5; i++) {
        const job = await claimJob(app.db, `worker-${i}`, TEST_EPOCH + 1000, 60_000);
        claims.push(whose.get(job!.link_id!) === orgs.big ? 'big' : 'small');
      }
      t.same(
        claims,
        ['big', 'small', 'big', 'small', 'big'],
        "the small tenant's syncs run beside the big one's backlog, not after it; within a tenant, the stalest first",
      );
    },
  );
});
