/*
 * The baselines for bench/movements, bare Koa handlers with no authentication, rate limiting, validation,
 * logging or headers beyond the total:
 *  - `/v1/accounts/{id}/movements`: the page query written the plain way (ORDER BY … LIMIT … OFFSET …) and
 *    a plain count(*) for the total (issue 4's baseline);
 *  - `/same/v1/accounts/{id}/movements`: the statements our endpoint runs (the account by id, then the page
 *    by a deferred join; the total from the account's counters), as raw SQL prepared once per connection,
 *    so that what ours serves less than this is what the whole stack costs (issue 17's baseline).
 *   node dist/bench/bare-movements-server.js <database url> <port>
 */
import Koa from 'koa';
import { runNamed } from '../src/db/bound-rows.js';
import { openDatabase } from '../src/db/database.js';
import { presentMovement, type PresentedMovementRow as MovementRow } from '../src/movements/movements.js';

const [url, port] = process.argv.slice(2) as [string, string];
const db = openDatabase({ url });
const app = new Koa();
app.silent = true;

const COLUMNS = [
  'id',
  'mode',
  'account_id',
  'amount',
  'currency',
  'description',
  'type',
  'reference_id',
  'counterparty',
  'posted_at',
  'transaction_date',
  'pending',
  'status',
  'canonical_id',
  'synced_at',
];
const ACCOUNT_SQL = 'SELECT * FROM accounts WHERE id = ? LIMIT 1';
const PAGE_SQL = `SELECT ${COLUMNS.map((column) => `m.${column}`).join(', ')} FROM movements AS m
  INNER JOIN (SELECT id FROM movements WHERE account_id = ? AND status = ? AND pending = ?
    ORDER BY posted_at DESC, id DESC LIMIT ? OFFSET ?) AS page ON m.id = page.id
  ORDER BY m.posted_at DESC, m.id DESC`;

app.use(async (ctx) => {
  const same = /^\/same\/v1\/accounts\/(acc_[0-9a-f]{16})\/movements$/.exec(ctx.path);
  const match = same ?? /^\/v1\/accounts\/(acc_[0-9a-f]{16})\/movements$/.exec(ctx.path);
  if (!match) {
    ctx.status = ctx.path === '/health' ? 200 : 404;
    return;
  }
  const page = Number(ctx.query.page ?? 1);
  const perPage = Number(ctx.query.per_page ?? 30);
  if (same) {
    const [account] = await runNamed<{ id: string; visible_count: number }>(
      db.reader,
      'bare_account',
      ACCOUNT_SQL,
      [match[1]!],
    );
    if (!account) {
      ctx.status = 404;
      return;
    }
    const rows = await runNamed<MovementRow>(db.reader, 'bare_movement_page', PAGE_SQL, [
      account.id,
      'normal',
      false,
      perPage,
      (page - 1) * perPage,
    ]);
    ctx.set('X-Total-Count', String(account.visible_count));
    ctx.body = rows.map(presentMovement);
    return;
  }
  const filtered = () =>
    db.reader('movements').where({ account_id: match[1], status: 'normal', pending: false });
  const [rows, [count]] = await Promise.all([
    filtered()
      .orderBy('posted_at', 'desc')
      .orderBy('id', 'desc')
      .limit(perPage)
      .offset((page - 1) * perPage) as Promise<MovementRow[]>,
    filtered().count({ n: '*' }),
  ]);
  ctx.set('X-Total-Count', String((count as { n: number }).n));
  ctx.body = rows.map(presentMovement);
});
app.listen(Number(port), '127.0.0.1');
process.on('SIGTERM', () => void db.close().then(() => process.exit(0)));
