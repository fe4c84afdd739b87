import t from 'tap';
import {
  appWithTenants,
  forEachEngine,
  linkBody,
  runSyncs,
  schedulerTick,
  tableCounts,
  type TestApp,
} from '../helpers/harness.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
interface Movement {
  amount: number;
  type: string;
  posted_at: string;
  description: string;
  counterparty: { name: string; rut: string | null } | null;
}

async function movementsOf(app: TestApp, key: string, accountId: string): Promise<Movement[]> {
  const rows: Movement[] = [];
  for (let page = 1; ; page++) {
    const response = await app.request(
      'GET',
      `/v1/accounts/${accountId}/movements?per_page=300&page=${page}`,
      {
        key,
      },
    );
    rows.push(...response.body);
    if (response.body.length < 300) return rows;
  }
}

forEachEngine(t, async (t, engine) => {
  const { app, tenant, other, sk } = await appWithTenants(t, engine);
  const create = async (body: unknown) => {
    const response = await app.request('POST', '/v1/links', { key: sk, body });
    if (response.status !== 200) throw new Error(`create link: ${response.status} ${response.text}`);
    return response.body as { id: string };
  };

  // Created on 2026-06-15 (the first sync reads 90 days, from 2026-03-17), then kept in sync by the
  // scheduler for three more months: the snapshot of 2026-09 sees March to August.
  const person = await create(linkBody({ credentials: { rut: '11.111.111-1', password: 'sandbox' } }));
  const company = await create(
    linkBody({
      holder_type: 'business',
      credentials: { rut: '11.111.111-1', password: 'sandbox', rut_empresa: '76.543.210-3' },
    }),
  );
  await runSyncs(app);
  while (app.clock.now() < Date.UTC(2026, 8, 18)) {
    app.clock.advance(10 * DAY);
    await schedulerTick(app);
  }

  const income = (linkId: string, query = '', key = sk) =>
    app.request('GET', `/v1/links/${linkId}/income${query}`, { key });

  t.test('the sandbox salary is the main income: monthly, regular, from the employer', async (t) => {
    const response = await income(person.id);
    t.equal(response.status, 200);
    const snapshot = response.body;
    t.match(snapshot, {
      object: 'income_snapshot',
      link_id: person.id,
      mode: 'test',
      currency: 'CLP',
      months: 6,
      window: { from: '2026-03-01', to: '2026-08-31' },
    });
    // What the bank booked as salaries, read through the movements API.
    const accounts = (await app.request('GET', `/v1/accounts?link_id=${person.id}`, { key: sk })).body;
    const checking = accounts.find(
      (a: { type: string; currency: string }) => a.type === 'checking' && a.currency === 'CLP',
    );
    const salaries = (await movementsOf(app, sk, checking.id))
      .filter((m) => m.type === 'salary' && m.posted_at >= '2026-03-01' && m.posted_at < '2026-09-01')
      .sort((a, b) => (a.posted_at < b.posted_at ? -1 : 1));
    t.same(
      salaries.map((m) => m.posted_at.slice(0, 10)),
      ['2026-03-31', '2026-04-30', '2026-05-29', '2026-06-30', '2026-07-31', '2026-08-31'],
      'the last working day of each month',
    );
    const main = snapshot.main_income;
    t.equal(main.source, salaries[0]!.counterparty!.name, "the employer's name");
    t.equal(main.source_rut, salaries[0]!.counterparty!.rut);
    t.equal(main.frequency, 'monthly');
    t.ok(main.regularity >= 0.9, `regularity ${main.regularity}`);
    t.equal(main.occurrences, 6);
    t.equal(main.last_seen, '2026-08-31');
    t.equal(main.average_amount, Math.round(salaries.reduce((sum, m) => sum + m.amount, 0) / 6));
    t.same(snapshot.other_recurring_income, [], 'no other regular payer in the sandbox');
    t.same(
      snapshot.monthly_totals.map((m: { month: string }) => m.month),
      ['2026-03', '2026-04', '2026-05', '2026-06', '2026-07', '2026-08'],
    );
    t.same(
      snapshot.monthly_totals.map((m: { recurring_income: number }) => m.recurring_income),
      salaries.map((m) => m.amount),
      'recurring income is the salary, month by month',
    );
    for (const month of snapshot.monthly_totals) t.ok(month.income >= month.recurring_income, month.month);
    t.same(
      snapshot.monthly_totals.map((m: { covered: boolean }) => m.covered),
      [false, true, true, true, true, true],
      'the history starts on 2026-03-17 (90 days before the link was created)',
    );
    const counted = snapshot.monthly_totals.slice(1);
    t.same(snapshot.averages, {
      monthly_income: Math.round(counted.reduce((s: number, m: { income: number }) => s + m.income, 0) / 5),
      monthly_recurring_income: Math.round(salaries.slice(1).reduce((s, m) => s + m.amount, 0) / 5),
      months_counted: 5,
    });

    const one = (await income(person.id, '?months=1')).body;
    t.same(one.window, { from: '2026-08-01', to: '2026-08-31' });
    t.equal(one.main_income.frequency, 'monthly', 'one month still sees the schedule of three');
    t.equal(one.monthly_totals.length, 1);
    const long = (await income(person.id, '?months=24&currency=CLP')).body;
    t.equal(long.monthly_totals.length, 24);
    t.equal(long.averages.months_counted, 5, 'months before the history are not averaged');
    t.equal(long.main_income.source, main.source);
    const usd = (await income(person.id, '?currency=USD')).body;
    t.equal(usd.main_income, null, 'this holder has no USD account');
    t.ok(usd.monthly_totals.every((m: { income: number }) => m.income === 0));
  });

  t.test('a business link has income but no salary-like recurring source', async (t) => {
    const snapshot = (await income(company.id)).body;
    t.equal(snapshot.main_income, null, 'customers pay on random days and amounts');
    t.same(snapshot.other_recurring_income, []);
    const covered = snapshot.monthly_totals.filter((m: { covered: boolean }) => m.covered);
    t.equal(covered.length, 5);
    t.ok(
      covered.every(
        (m: { income: number; recurring_income: number }) => m.income > 0 && m.recurring_income === 0,
      ),
      'customer transfers count as income, none as recurring',
    );
    t.ok(snapshot.averages.monthly_income > 0);
    t.equal(snapshot.averages.monthly_recurring_income, 0);
  });

  t.test('a bank that does not offer income to the holder type refuses', async (t) => {
    const bice = await create(linkBody({ bank_id: 'bice' }));
    const response = await income(bice.id);
    t.equal(response.status, 400);
    t.equal(response.body.error.code, 'product_unavailable');
  });

  t.test('bad parameters are 400s that name them', async (t) => {
    for (const [query, param] of [
      ['months=0', 'months'],
      ['months=25', 'months'],
      ['months=1.5', 'months'],
      ['months=six', 'months'],
      ['currency=cl', 'currency'],
      ['currency=clp', 'currency'],
      ['currency=CLPX', 'currency'],
      ['currency=', 'currency'],
      ['since=2026-01-01', 'since'],
    ]) {
      const response = await income(person.id, `?${query}`);
      t.equal(response.status, 400, query!);
      t.equal(response.body.error.type, 'invalid_request_error', query!);
      t.equal(response.body.error.param, param, query!);
    }
    t.equal((await income('link_nothex', '')).status, 400);
  });

  t.test("another organisation's link is 404, the other mode 403, a publishable key 403", async (t) => {
    const foreign = await income(person.id, '', other.keys.sk_test.secret);
    t.equal(foreign.status, 404);
    t.equal(foreign.body.error.code, 'resource_missing');
    t.equal((await income('link_0000000000000000')).status, 404);
    const live = await income(person.id, '', tenant.keys.sk_live.secret);
    t.equal(live.status, 403);
    t.equal(live.body.error.code, 'wrong_mode');
    const publishable = await income(person.id, '', tenant.keys.pk_test.secret);
    t.equal(publishable.status, 403);
    t.equal(publishable.body.error.code, 'insufficient_scope');
    t.equal((await app.request('GET', `/v1/links/${person.id}/income`)).status, 401);
  });

  t.test(
    'own transfers, reversals and card payments stored for the link do not count; a third party does',
    async (t) => {
      const accounts: { id: string; type: string; currency: string; holder_name: string | null }[] =
        await app.db.knex('accounts').where({ link_id: person.id });
      const checking = accounts.find((a) => a.type === 'checking' && a.currency === 'CLP')!;
      const savings = accounts.find((a) => a.type === 'savings')!;
      const card = accounts.find((a) => a.type === 'credit_card')!;
      const july = async () =>
        (await income(person.id)).body.monthly_totals.find((m: { month: string }) => m.month === '2026-07')
          .income;
      const before = await july();
      let n = 0;
      const insert = (
        accountId: string,
        amount: number,
        description: string,
        counterparty: unknown = null,
      ) => {
        n += 1;
        const at = Date.UTC(2026, 6, 14, 12, n);
        return app.db.knex('movements').insert({
          id: `mov_00000000000001${String(n).padStart(2, '0')}`,
          org_id: tenant.orgId,
          mode: 'test',
          link_id: person.id,
          account_id: accountId,
          bank_ref: `income-test-${n}`,
          fingerprint: `income-test-${n}`,
          amount,
          currency: 'CLP',
          description,
          type: 'transfer',
          reference_id: `income-test-${n}`,
          counterparty: counterparty === null ? null : JSON.stringify(counterparty),
          posted_at: at,
          transaction_date: '2026-07-14',
          pending: false,
          status: 'normal',
          synced_at: app.clock.now(),
          created_at: app.clock.now(),
        });
      };
      const holder = {
        name: checking.holder_name ?? 'Nicolás Silva Soto',
        rut: '11111111-1',
        bankId: 'bci',
        accountLast4: '1234',
      };
      await insert(checking.id, -777_000, 'TRANSFERENCIA A CTA AHORRO');
      await insert(savings.id, 777_000, 'ABONO TRANSFERENCIA');
      await insert(checking.id, 250_000, `TRANSFERENCIA DE ${holder.name}`, holder);
      await insert(card.id, 90_000, 'PAGO TARJETA - GRACIAS');
      await insert(checking.id, 64_000, 'REVERSO CARGO PAC SEGUROS');
      t.equal(await july(), before, 'none of them is income');
      await insert(checking.id, 123_000, 'TRANSFERENCIA DE PEDRO ROJAS', {
        name: 'Pedro Rojas Díaz',
        rut: '12345678-5',
        bankId: 'itau',
        accountLast4: '9876',
      });
      t.equal(await july(), before + 123_000, 'a transfer from someone else is');
      await app.db.knex('movements').where('bank_ref', 'like', 'income-test-%').delete();
    },
  );

  t.test('the snapshot writes nothing and queues no sync', async (t) => {
    const before = await tableCounts(app.db);
    const link = await app.db.knex('links').where({ id: person.id }).first();
    const jobs = await app.db.knex('jobs').select('*');
    const first = (await income(person.id)).body;
    for (const query of ['?months=3', '?months=24', '?currency=USD', '?months=0'])
      await income(person.id, query);
    await income(person.id, '', other.keys.sk_test.secret);
    t.same(await tableCounts(app.db), before, 'row counts unchanged');
    t.same(await app.db.knex('links').where({ id: person.id }).first(), link, 'the link is untouched');
    t.same(await app.db.knex('jobs').select('*'), jobs, 'no sync job queued');
    t.same((await income(person.id)).body, first, 'the same answer twice');
  });
});
