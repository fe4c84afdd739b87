import { institutionsOf } from '../banks/institutions.js';
import { Authenticator } from '../auth/authenticator.js';
import { recordKeyUse } from '../keys/keys.js';
import { offsetClock, type Clock } from '../clock/clock.js';
import type { Config } from '../config/defaults.js';
import { openDatabase, type Database } from '../db/database.js';
import { createLogger, type Logger } from '../logging/logger.js';
import { resolveLogFormat } from '../logging/pretty.js';
import { createHttpMetrics } from '../metrics/metrics.js';
import { queueDepths } from './queue-depths.js';
import { retentionTotals } from '../scheduler/retention-totals.js';
import { bankCapacities, capacitySettingsOf } from '../banks/budget/capacity.js';
import { DatabaseRateLimiter, MemoryRateLimiter, type RateLimiter } from '../ratelimit/limiter.js';
import { loadSecretBox } from '../secrets/master-key-file.js';
import type { SecretBox } from '../secrets/secret-box.js';
import type { AppServices } from '../api/services.js';
import type { ConnectorResolver } from '../banks/resolver.js';
import { defaultConnectors } from '../banks/default-connectors.js';
import { ConsentClients } from '../banks/consent/client.js';

export interface ServiceOverrides {
  connectors?: ConnectorResolver;
  clock?: Clock;
  logger?: Logger;
  db?: Database;
  secrets?: SecretBox;
}

/** The composition root: one place builds the database handle and services for a process and passes them down. */
export function buildServices(
  config: Readonly<Config>,
  role: string,
  overrides: ServiceOverrides = {},
): AppServices {
  const db = overrides.db ?? openDatabase({ url: config.databaseUrl });
  const clock = overrides.clock ?? offsetClock(config.clockOffsetMs);
  const logger =
    overrides.logger ??
    createLogger({
      level: config.log.level,
      name: role,
      file: config.log.file,
      format: resolveLogFormat(config.log.format, config.log.file !== '', process.stdout.isTTY === true),
    });
  const secrets = overrides.secrets ?? loadSecretBox(config);
  const authenticator = new Authenticator({
    db: db.reader,
    clock,
    brand: config.brand,
    defaultLimits: config.rateLimits,
    cacheSeconds: config.auth.cacheSeconds,
    onKeyUsed: (keyId, at) => {
      recordKeyUse(db, keyId, at).catch((error: Error) =>
        logger.warn({ err: error.message, key: keyId }, 'could not record key use'),
      );
    },
  });
  return {
    config,
    db,
    clock,
    logger,
    secrets,
    authenticator,
    rateLimiter: chooseRateLimiter(config, db),
    metrics: createHttpMetrics(
      async () => ({ ...(await queueDepths(db)) }),
      () => retentionTotals(db.reader),
      async () =>
        (await bankCapacities(db.reader, capacitySettingsOf(config))).map((c) => ({
          bank: c.bankId,
          mode: c.mode,
          load: c.available === 0 ? 0 : c.needed / c.available,
        })),
    ),
    connectors: overrides.connectors ?? defaultConnectors(config),
    consentClients: new ConsentClients(secrets, { institutions: institutionsOf(config) }),
  };
}

function chooseRateLimiter(config: Readonly<Config>, db: Database): RateLimiter {
  const store =
    config.rateLimitStore === 'auto'
      ? db.engine === 'postgres'
        ? 'database'
        : 'memory'
      : config.rateLimitStore;
  return store === 'database' ? new DatabaseRateLimiter(db) : new MemoryRateLimiter();
}
