/*
 * The baseline for api-overhead: a bare Koa server that runs the same resource query as the real route,
 * with no authentication, rate limiting, validation, logging or metrics.
 *   node dist/bench/bare-server.js <database url> <port>
 */
import Koa from 'koa';
import { runNamed } from '../src/db/bound-rows.js';
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
  // The statement prepared once per connection, as the real route's is (runNamed).
  const [row] = await runNamed<WebhookEndpointRow>(
    db.reader,
    'bare_webhook_endpoint',
    'SELECT * FROM webhook_endpoints WHERE id = ? LIMIT 1',
    [match[1]!],
  );
  ctx.body = row ? presentEndpoint(row) : { error: 'missing' };
});
app.listen(Number(port), '127.0.0.1');
process.on('SIGTERM', () => void db.close().then(() => process.exit(0)));
