import t from 'tap';
import parseLinkHeader from 'parse-link-header';
import {
  appWithTenants,
  forEachEngine,
  linkBody,
  runSyncs,
  schedulerTick,
  type TestApp,
} from '../helpers/harness.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
interface Movement {
  id: string;
  amount: number;
  pending: boolean;
  status: string;
  canonical_id: string | null;
  posted_at: string;
  synced_at: string;
  description: string;
}

/** Every page of a list, following the Link header's `next` as a client library would. */
async function readAll(app: TestApp, key: string, path: string): Promise<Movement[]> {
  const rows: Movement[] = [];
  let next: string | undefined = path;
  while (next) {
    const response = await app.request('GET', next, { key });
    if (response.status !== 200) throw new Error(`${next}: ${response.status} ${response.text}`);
    rows.push(...response.body);
    const link = parseLinkHeader(response.headers.get('link'))?.next?.url;
    next = link ? new URL(link).pathname + new URL(link).search : undefined;
  }
  return rows;
}

forEachEngine(t, async (t, engine) => {
  const { app, tenant, other, sk } = await appWithTenants(t, engine);
  const link = (
    await app.request('POST', '/v1/links', {
      key: sk,
      body: linkBody({ credentials: { rut: '11.111.111-1', password: 'sandbox' } }),
    })
  ).body;
  await runSyncs(app);
  const accounts = (await app.request('GET', `/v1/accounts?link_id=${link.id}`, { key: sk })).body;
  const card = accounts.find((a: { type: string }) => a.type === 'credit_card');
  const checking = accounts.find(
    (a: { type: string; currency: string }) => a.type === 'checking' && a.currency === 'CLP',
  );

  t.test('accounts: balances in minor units; removed accounts only on request', async (t) => {
    t.ok(accounts.length >= 3);
    for (const account of accounts) {
      t.ok(Number.isInteger(account.balance.current), 'integer minor units');
      t.equal(account.link_id, link.id);
    }
    t.ok(Number.isInteger(card.balance.limit), 'a credit card has a limit');
    t.equal(checking.balance.limit, null);
    t.same((await app.request('GET', `/v1/accounts/${checking.id}`, { key: sk })).body, checking);
    // The sandbox's Cuenta Vista disappears, and another account appears, on the third successful sync.
    for (let i = 0; i < 2; i++) {
      app.clock.advance(4 * HOUR + 60_000);
      await schedulerTick(app);
    }
    const visible = (await app.request('GET', `/v1/accounts?link_id=${link.id}`, { key: sk })).body;
    const all = (
      await app.request('GET', `/v1/accounts?link_id=${link.id}&include_removed=true`, { key: sk })
    ).body;
    const removed = all.filter((a: { status: string }) => a.status === 'removed');
    t.equal(removed.length, 1, 'one account was removed');
    t.match(removed[0], { removed_from_link: true, status: 'removed' });
    t.ok(removed[0].removed_at);
    t.notOk(
      visible.some((a: { id: string }) => a.id === removed[0].id),
      'hidden by default',
    );
    t.equal(all.length, visible.length + 1);
    const removedMovements = await app.request('GET', `/v1/accounts/${removed[0].id}/movements`, { key: sk });
    t.equal(removedMovements.status, 200, "a removed account's movements stay readable");
    t.ok(removedMovements.body.length > 0);
    const types = (await app.db.knex('events').where({ link_id: link.id }).select('type')).map(
      (e: { type: string }) => e.type,
    );
    t.ok(types.includes('account.removed'));
    t.equal((await app.request('GET', '/v1/accounts', { key: sk })).body.error.param, 'link_id');
    t.equal(
      (await app.request('GET', `/v1/accounts?link_id=${link.id}`, { key: other.keys.sk_test.secret }))
        .status,
      404,
    );
    t.equal(
      (await app.request('GET', `/v1/accounts?link_id=${link.id}`, { key: tenant.keys.sk_live.secret }))
        .status,
      403,
    );
    t.equal(
      (await app.request('GET', `/v1/accounts/${checking.id}`, { key: other.keys.sk_test.secret })).status,
      404,
    );
  });

  t.test(
    'the list hides internal and pending rows by default, filters on posted_at and is a plain array',
    async (t) => {
      const path = `/v1/accounts/${card.id}/movements`;
      const visible = await readAll(app, sk, `${path}?per_page=300`);
      t.ok(visible.length > 0);
      t.ok(
        visible.every((m) => m.status === 'normal' && m.pending === false),
        'rule 1 and 2: no internal, no pending rows',
      );
      const withPending = await readAll(app, sk, `${path}?per_page=300&confirmed_only=false`);
      t.ok(
        withPending.some((m) => m.pending),
        'pending rows with confirmed_only=false',
      );
      t.equal(withPending.filter((m) => !m.pending).length, visible.length);
      const internal = await app.db
        .knex('movements')
        .where({ account_id: card.id })
        .whereNot('status', 'normal');
      const allIds = new Set([...visible, ...withPending].map((m) => m.id));
      t.ok(
        internal.every((row: { id: string }) => !allIds.has(row.id)),
        'internal rows never listed',
      );
      const sorted = [...visible].sort(
        (a, b) => Date.parse(b.posted_at) - Date.parse(a.posted_at) || (b.id < a.id ? -1 : 1),
      );
      t.same(
        visible.map((m) => m.id),
        sorted.map((m) => m.id),
        'newest first',
      );
      const middle = visible[Math.floor(visible.length / 2)]!;
      const day = middle.posted_at.slice(0, 10);
      const sinceDay = await readAll(app, sk, `${path}?since=${day}`);
      t.ok(sinceDay.every((m) => m.posted_at.slice(0, 10) >= day));
      t.equal(sinceDay.length, visible.filter((m) => m.posted_at.slice(0, 10) >= day).length);
      const untilDay = await readAll(app, sk, `${path}?until=${day}`);
      t.ok(
        untilDay.every((m) => m.posted_at.slice(0, 10) <= day),
        'a date as until covers its whole day',
      );
      t.equal(untilDay.length, visible.filter((m) => m.posted_at.slice(0, 10) <= day).length);
      const exact = await readAll(
        app,
        sk,
        `${path}?since=${encodeURIComponent(middle.posted_at)}&until=${encodeURIComponent(middle.posted_at)}`,
      );
      t.ok(exact.some((m) => m.id === middle.id));
    },
  );

  t.test('pagination headers and paging past the end', async (t) => {
    const path = `/v1/accounts/${checking.id}/movements`;
    const all = await readAll(app, sk, `${path}?per_page=300`);
    const first = await app.request('GET', `${path}?per_page=5`, { key: sk });
    t.equal(first.headers.get('x-total-count'), String(all.length), 'the total matches');
    t.equal(first.body.length, 5);
    const links = parseLinkHeader(first.headers.get('link'))!;
    const last = Math.ceil(all.length / 5);
    t.equal(links.last!.page, String(last));
    t.equal(links.next!.url, `${app.config.api.baseUrl}${path}?page=2&per_page=5`);
    const beyond = await app.request('GET', `${path}?per_page=5&page=${last + 3}`, { key: sk });
    t.same(beyond.body, []);
    t.equal(beyond.headers.get('x-total-count'), String(all.length));
    const filtered = await app.request('GET', `${path}?per_page=5&since=2020-01-01&confirmed_only=false`, {
      key: sk,
    });
    t.ok(
      parseLinkHeader(filtered.headers.get('link'))!.next!.url.includes('since=2020-01-01'),
      'filters are carried into the links',
    );
    t.ok(parseLinkHeader(filtered.headers.get('link'))!.next!.url.includes('confirmed_only=false'));
    const pages: string[] = [];
    for (let page = 1; page <= last; page++)
      pages.push(
        ...(await app.request('GET', `${path}?per_page=5&page=${page}`, { key: sk })).body.map(
          (m: Movement) => m.id,
        ),
      );
    t.same(
      pages,
      all.map((m) => m.id),
      'the pages add up to the whole list, in order',
    );
  });

  t.test(
    'rule 5: paging by page can skip a movement inserted between two calls; synced_since does not',
    async (t) => {
      const path = `/v1/accounts/${checking.id}/movements`;
      const page1 = (await app.request('GET', `${path}?per_page=3&page=1`, { key: sk })).body as Movement[];
      const cursor = (await readAll(app, sk, `${path}?synced_since=2000-01-01&per_page=300`)).at(
        -1,
      )!.synced_at;
      // A movement booked retroactively in the middle of page 1 arrives between the two calls.
      const middle = page1[1]!;
      await app.db.knex('movements').insert({
        id: 'mov_00000000000000aa',
        org_id: tenant.orgId,
        mode: 'test',
        link_id: link.id,
        account_id: checking.id,
        bank_ref: 'late-1',
        fingerprint: 'late-1',
        amount: -1_000,
        currency: 'CLP',
        description: 'COMPRA TARDIA',
        type: 'card_purchase',
        posted_at: Date.parse(middle.posted_at),
        transaction_date: middle.posted_at.slice(0, 10),
        pending: false,
        status: 'normal',
        synced_at: Date.parse(cursor) + 1,
        created_at: app.clock.now(),
      });
      await app.db.knex('accounts').where({ id: checking.id }).increment('visible_count', 1);
      const page2 = (await app.request('GET', `${path}?per_page=3&page=2`, { key: sk })).body as Movement[];
      const seen = [...page1, ...page2].map((m) => m.id);
      t.notOk(seen.includes('mov_00000000000000aa'), 'the page walk missed it (rule 5)');
      t.equal(new Set(seen).size, seen.length - 1, 'and shows one row twice, shifted from page 1 to page 2');
      const feed = await readAll(app, sk, `${path}?synced_since=${encodeURIComponent(cursor)}`);
      t.same(
        feed.map((m) => m.id),
        ['mov_00000000000000aa'],
        'the cursor finds it',
      );
      await app.db.knex('movements').where({ id: 'mov_00000000000000aa' }).delete();
      await app.db.knex('accounts').where({ id: checking.id }).decrement('visible_count', 1);
    },
  );

  t.test('bad parameters are 400s that name them', async (t) => {
    const path = `/v1/accounts/${checking.id}/movements`;
    for (const [query, param] of [
      ['page=0', 'page'],
      ['per_page=0', 'per_page'],
      ['per_page=301', 'per_page'],
      ['page=two', 'page'],
      ['page=1e20', 'page'],
      ['page=99999999999999999999', 'page'],
      ['page=1000000001', 'page'],
      ['page=Infinity', 'page'],
      ['page=NaN', 'page'],
      ['page=1.5', 'page'],
      // Decimal digits only: JavaScript's Number() would read each of these as a page (issue 28).
      ['page=0x10', 'page'],
      ['page=1e2', 'page'],
      ['page=%201', 'page'],
      ['page=+1', 'page'],
      ['per_page=0b11', 'per_page'],
      ['since=yesterday', 'since'],
      ['until=2026-13-45', 'until'],
      ['since=2026-02-31', 'since'],
      ['until=2026-02-30', 'until'],
      ['since=2026-02-29', 'since'],
      ['since=2026-04-31T10:00:00Z', 'since'],
      ['until=2026-01-31T24:00Z', 'until'],
      ['synced_since=2026-01-31T12:60:00Z', 'synced_since'],
      ['synced_since=nope', 'synced_since'],
      ['confirmed_only=maybe', 'confirmed_only'],
      ['include_removals=true', 'include_removals'],
      ['include_removals=yes&synced_since=2020-01-01', 'include_removals'],
      ['since=2026-02-01&until=2026-01-01', 'until'],
      ['colour=red', 'colour'],
    ]) {
      const response = await app.request('GET', `${path}?${query}`, { key: sk });
      t.equal(response.status, 400, query!);
      t.equal(response.body.error.param, param, query!);
    }
    for (const query of [
      'since=2024-02-29',
      'until=2026-12-31T23:59:59.999999Z',
      'since=2026-01-31T12:00%2B03:00',
    ]) {
      t.equal(
        (await app.request('GET', `${path}?${query}`, { key: sk })).status,
        200,
        `${query} is a real time`,
      );
    }
    const deepest = await app.request('GET', `${path}?page=1000000000`, { key: sk });
    t.same([deepest.status, deepest.body], [200, []], 'the deepest page is an empty page');
    t.equal(
      (await app.request('GET', `${path}`, { key: tenant.keys.pk_test.secret })).status,
      403,
      'secret keys only',
    );
    t.equal((await app.request('GET', `${path}`, { key: other.keys.sk_test.secret })).status, 404);
    t.equal((await app.request('GET', `${path}`, { key: tenant.keys.sk_live.secret })).status, 403);
  });

  for (const confirmedOnly of [true, false]) {
    t.test(
      `property: a cursor consumer (confirmed_only=${confirmedOnly}) always holds exactly what the server lists`,
      async (t) => {
        const fresh = await app.request('POST', '/v1/links', {
          key: sk,
          body: linkBody({ credentials: { rut: '55.555.555-5', password: 'sandbox' } }),
        });
        await runSyncs(app);
        const ids = (await app.request('GET', `/v1/accounts?link_id=${fresh.body.id}`, { key: sk })).body.map(
          (a: { id: string }) => a.id,
        );
        const copies = new Map<string, Map<string, Movement>>(ids.map((id: string) => [id, new Map()]));
        const cursors = new Map<string, string>(ids.map((id: string) => [id, '2000-01-01T00:00:00.000Z']));
        let seed = 7;
        const random = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
        let removals = 0;
        let pendingPosted = 0;
        for (let round = 0; round < 30; round++) {
          for (const accountId of ids) {
            const copy = copies.get(accountId)!;
            const perPage = 1 + Math.floor(random() * 7);
            const feed = await readAll(
              app,
              sk,
              `/v1/accounts/${accountId}/movements?synced_since=${encodeURIComponent(cursors.get(accountId)!)}&include_removals=true&confirmed_only=${confirmedOnly}&per_page=${perPage}`,
            );
            for (const row of feed) {
              if (row.status === 'normal') {
                if (copy.get(row.id)?.pending && !row.pending) pendingPosted += 1;
                copy.set(row.id, row);
              } else {
                removals += copy.delete(row.id) ? 1 : 0;
              }
              cursors.set(
                accountId,
                row.synced_at > cursors.get(accountId)! ? row.synced_at : cursors.get(accountId)!,
              );
            }
            const server = await readAll(
              app,
              sk,
              `/v1/accounts/${accountId}/movements?confirmed_only=${confirmedOnly}&per_page=300`,
            );
            const mine = [...copy.values()].sort((a, b) => (a.id < b.id ? -1 : 1));
            const theirs = [...server].sort((a, b) => (a.id < b.id ? -1 : 1));
            if (JSON.stringify(mine) !== JSON.stringify(theirs)) {
              t.same(mine, theirs, `round ${round}, account ${accountId}: the copy equals the list`);
              return;
            }
          }
          app.clock.advance(Math.floor(random() * 30 * HOUR) + HOUR);
          await schedulerTick(app);
          if (random() < 0.2) app.clock.advance(DAY);
        }
        t.pass('the copy equalled the server after every round');
        if (!confirmedOnly) {
          t.ok(removals > 0, `the feed carried removals of rows the consumer held (${removals})`);
          t.ok(pendingPosted > 0, `pending rows posted under the same id (${pendingPosted})`);
        }
      },
    );
  }
});
