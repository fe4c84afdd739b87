/*
 * The api-overhead bench's second baseline: the real API (router, validation, handler, metrics) of an
 * installed home, with the three parts the target names taken out: authentication (every request is the
 * given key's principal, resolved once at start), rate limiting (always allowed) and logging (silent).
 * What it serves faster than `svc serve` is what those three cost.
 *   node dist/bench/unguarded-server.js <home> <port> <api key>
 */
import { startApiServer } from '../src/http/server.js';
import type { Authenticator } from '../src/auth/authenticator.js';
import { loadConfig } from '../src/config/load-config.js';
import { silentLogger } from '../src/logging/logger.js';
import { buildServices } from '../src/processes/services.js';
import type { RateLimiter } from '../src/ratelimit/limiter.js';
import { describe } from '../src/ratelimit/token-bucket.js';

const [home, port, key] = process.argv.slice(2) as [string, string, string];
const config = loadConfig({ home, env: { SVC_HOME: home } });
const services = buildServices(config, 'api', { logger: silentLogger });
const principal = await services.authenticator.authenticate(`Bearer ${key}`);
const unlimited: RateLimiter = {
  take: async (_key, limit, now) => describe(true, { tokens: limit.burst, updatedAt: now }, limit),
};
const server = await startApiServer(
  {
    ...services,
    authenticator: { authenticate: async () => principal } as unknown as Authenticator,
    rateLimiter: unlimited,
  },
  { host: '127.0.0.1', port: Number(port) },
);
process.on(
  'SIGTERM',
  () =>
    void server
      .close()
      .then(() => services.db.close())
      .then(() => process.exit(0)),
);
