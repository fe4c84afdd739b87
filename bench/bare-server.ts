/*
 * The baseline for api-overhead: a bare Koa server that runs the same resource query as the real route,
 * with no authentication, rate limiting, validation, logging or metrics.
 *   node dist/bench/bare-server.js <database url> <port>
 */
import Koa from 'koa';
import { openDatabase } from '../src/db/database.js';
import { presentEndpoint, type WebhookEndpointRow } from '../src/webhooks/endpoints.js';

const [url, port] = process.argv.slice(2) as [string, string];
const db = openDatabase({ url });
const app = new Koa();
app.silent = true;
app.use(async (ctx) => {
  const match = /^\/v1\/webhook_endpoints\/(we_[0-9a-f]{16})$/.exec(ctx.path);
  if (!match) {
    ctx.status = 404;
    return;
  }
  const row: WebhookEndpointRow | undefined = await db
    .reader('webhook_endpoints')
    .where({ id: match[1] })
    .first();
  ctx.body = row ? presentEndpoint(row) : { error: 'missing' };
});
app.listen(Number(port), '127.0.0.1');
process.on('SIGTERM', () => void db.close().then(() => process.exit(0)));
