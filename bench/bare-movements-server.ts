/*
 * The baseline for bench/movements: a bare Koa handler with the same page query as the endpoint written
 * the plain way (ORDER BY … LIMIT … OFFSET …) and a plain count(*) for the total, with no authentication,
 * rate limiting, validation, logging or headers beyond the total.
 *   node dist/bench/bare-movements-server.js <database url> <port>
 */
import Koa from 'koa';
import { openDatabase } from '../src/db/database.js';
import { presentMovement, type PresentedMovementRow as MovementRow } from '../src/movements/movements.js';

const [url, port] = process.argv.slice(2) as [string, string];
const db = openDatabase({ url });
const app = new Koa();
app.silent = true;
app.use(async (ctx) => {
  const match = /^\/v1\/accounts\/(acc_[0-9a-f]{16})\/movements$/.exec(ctx.path);
  if (!match) {
    ctx.status = ctx.path === '/health' ? 200 : 404;
    return;
  }
  const page = Number(ctx.query.page ?? 1);
  const perPage = Number(ctx.query.per_page ?? 30);
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
