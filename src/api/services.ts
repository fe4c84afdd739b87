import type { Authenticator } from '../auth/authenticator.js';
import type { Clock } from '../clock/clock.js';
import type { Config } from '../config/defaults.js';
import type { Database } from '../db/database.js';
import type { Logger } from '../logging/logger.js';
import type { RateLimiter } from '../ratelimit/limiter.js';
import type { SecretBox } from '../secrets/secret-box.js';
import type { HttpMetrics } from '../metrics/metrics.js';
import type { ConnectorResolver } from '../banks/resolver.js';
import type { ConsentClients } from '../banks/consent/client.js';

/** Everything a request handler may use, built once per process by the composition root. */
export interface AppServices {
  config: Readonly<Config>;
  db: Database;
  clock: Clock;
  logger: Logger;
  secrets: SecretBox;
  authenticator: Authenticator;
  rateLimiter: RateLimiter;
  metrics: HttpMetrics;
  /** The connector for a bank in a mode: the sandbox in test mode, configured gateways in live mode. */
  connectors: ConnectorResolver;
  /** This process's clients of consent banks (one per registration); closed when the process stops. */
  consentClients: ConsentClients;
}
