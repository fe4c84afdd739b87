import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import t from 'tap';
import {
  createTenant,
  forEachEngine,
  linkBody,
  runSyncs,
  schedulerTick,
  startTestApp,
} from '../helpers/harness.js';

const CONSUMER = fileURLToPath(new URL('../../../docs/examples/incremental-consumer.mjs', import.meta.url));
const run = promisify(execFile);
const HOUR = 3_600_000;

forEachEngine(t, async (t, engine) => {
  const app = await startTestApp(t, engine);
  const tenant = await createTenant(app, {
    rateLimits: {
      read: { perMinute: 1_000_000, burst: 100_000 },
      resource_write: { perMinute: 1000, burst: 100 },
    },
  });
  const key = tenant.keys.sk_test.secret;
  const links: string[] = [];
  for (const rut of ['11.111.111-1', '55.555.555-5']) {
    links.push(
      (
        await app.request('POST', '/v1/links', {
          key,
          body: linkBody({ credentials: { rut, password: 'sandbox' } }),
        })
      ).body.id,
    );
  }
  await runSyncs(app);
  const dir = mkdtempSync(join(tmpdir(), 'svc-consumer-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));

  t.test('the example consumer, run between syncs, ends with exactly the visible movements', async (t) => {
    let removed = 0;
    for (let round = 0; round < 14; round++) {
      for (const linkId of links) {
        const { stdout } = await run(process.execPath, [CONSUMER, linkId, join(dir, `${linkId}.json`)], {
          env: { ...process.env, SVC_BASE_URL: app.url, SVC_SECRET_KEY: key },
        });
        removed += JSON.parse(stdout).removed;
      }
      app.clock.advance((5 + ((round * 7) % 19)) * HOUR);
      await schedulerTick(app);
    }
    for (const linkId of links) {
      await run(process.execPath, [CONSUMER, linkId, join(dir, `${linkId}.json`)], {
        env: { ...process.env, SVC_BASE_URL: app.url, SVC_SECRET_KEY: key },
      });
      const copy = JSON.parse(readFileSync(join(dir, `${linkId}.json`), 'utf8')) as {
        movements: Record<string, { id: string }>;
      };
      const accounts = (
        await app.request('GET', `/v1/accounts?link_id=${linkId}&include_removed=true`, { key })
      ).body as { id: string }[];
      const server: { id: string }[] = [];
      for (const account of accounts) {
        for (let page = 1; ; page++) {
          const rows = (
            await app.request(
              'GET',
              `/v1/accounts/${account.id}/movements?confirmed_only=false&per_page=300&page=${page}`,
              { key },
            )
          ).body;
          server.push(...rows);
          if (rows.length < 300) break;
        }
      }
      const byId = (rows: { id: string }[]) => Object.fromEntries(rows.map((row) => [row.id, row]));
      t.ok(server.length > 20, `${linkId} has movements to copy (${server.length})`);
      t.same(
        byId(Object.values(copy.movements)),
        byId(server),
        `${linkId}: the copy equals the server's list, row for row`,
      );
    }
    t.ok(removed > 0, `the consumer applied removals (${removed})`);
  });
});
