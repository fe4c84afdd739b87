import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { Ajv } from 'ajv';
import { BUILT_IN_BANK_IDS } from '../banks/institutions.js';
import { proxyEntryProblem } from '../net/client-address.js';
import { defaultConfig, type Config } from './defaults.js';
import { configSchema } from './schema.js';
import { maskUrl } from '../db/database-url.js';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Source = { name: string };
type DeepPartial<T> = {
  [K in keyof T]?: T[K] extends object ? (T[K] extends unknown[] ? T[K] : DeepPartial<T[K]>) : T[K];
};

export interface LoadConfigOptions {
  /** `--home`; otherwise SVC_HOME; otherwise ~/.svc. */
  home?: string;
  /** The environment to read; the CLI passes process.env, tests pass their own. */
  env?: Record<string, string | undefined>;
  /** Values from command-line flags, which win over everything else. */
  overrides?: DeepPartial<Config>;
}

export const CONFIG_FILE = 'config.json';

export function resolveHome(flag: string | undefined, env: Record<string, string | undefined>): string {
  return resolve(flag ?? env.SVC_HOME ?? join(homedir(), '.svc'));
}

/**
 * Defaults, then `<home>/config.json`, then `SVC_*` environment variables, then flags; validated once into a
 * frozen object. Every leaf has an environment name derived from its path: `api.port` is `SVC_API_PORT`,
 * `rateLimits.read.perMinute` is `SVC_RATE_LIMITS_READ_PER_MINUTE`.
 */
export function loadConfig(options: LoadConfigOptions = {}): Readonly<Config> {
  const env = options.env ?? {};
  const home = resolveHome(options.home, env);
  const config = defaultConfig(home) as unknown as Record<string, unknown>;
  const sources = new Map<string, Source>();

  const filePath = join(home, CONFIG_FILE);
  if (existsSync(filePath)) {
    let fromFile: unknown;
    try {
      fromFile = JSON.parse(readFileSync(filePath, 'utf8'));
    } catch (error) {
      throw new ConfigError(`Cannot read ${filePath}: ${(error as Error).message}`);
    }
    if (typeof fromFile !== 'object' || fromFile === null || Array.isArray(fromFile)) {
      throw new ConfigError(`${filePath} must hold a JSON object.`);
    }
    mergeInto(config, fromFile as Record<string, unknown>, [], sources, { name: filePath });
  }
  applyEnvironment(config, [], env, sources);
  if (options.overrides)
    mergeInto(config, options.overrides as Record<string, unknown>, [], sources, { name: 'flag' });
  config.home = home;

  validate(config, sources);
  const typed = config as unknown as Config;
  if (typed.api.baseUrl === '') typed.api.baseUrl = `http://${typed.api.host}:${typed.api.port}`;
  return deepFreeze(typed);
}

export function envName(path: string[]): string {
  return 'SVC_' + path.map((part) => part.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toUpperCase()).join('_');
}

function applyEnvironment(
  node: Record<string, unknown>,
  path: string[],
  env: Record<string, string | undefined>,
  sources: Map<string, Source>,
): void {
  for (const [key, current] of Object.entries(node)) {
    const here = [...path, key];
    if (current !== null && typeof current === 'object' && !Array.isArray(current)) {
      applyEnvironment(current as Record<string, unknown>, here, env, sources);
      continue;
    }
    const name = envName(here);
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    node[key] = parseEnvValue(raw, current, name);
    sources.set(here.join('.'), { name });
  }
}

function parseEnvValue(raw: string, current: unknown, name: string): unknown {
  if (typeof current === 'number') {
    const value = Number(raw);
    if (!Number.isFinite(value)) throw new ConfigError(`${name} must be a number, got "${raw}".`);
    return value;
  }
  if (typeof current === 'boolean') {
    if (raw !== 'true' && raw !== 'false')
      throw new ConfigError(`${name} must be true or false, got "${raw}".`);
    return raw === 'true';
  }
  if (Array.isArray(current)) {
    try {
      return JSON.parse(raw);
    } catch {
      throw new ConfigError(`${name} must be a JSON array, got "${raw}".`);
    }
  }
  return raw;
}

function mergeInto(
  target: Record<string, unknown>,
  patch: Record<string, unknown>,
  path: string[],
  sources: Map<string, Source>,
  source: Source,
): void {
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    const here = [...path, key];
    const existing = target[key];
    if (
      value !== null &&
      typeof value === 'object' &&
      !Array.isArray(value) &&
      existing !== null &&
      typeof existing === 'object' &&
      !Array.isArray(existing)
    ) {
      mergeInto(existing as Record<string, unknown>, value as Record<string, unknown>, here, sources, source);
    } else {
      target[key] = value;
      sources.set(here.join('.'), source);
    }
  }
}

/** Where the simulated consent bank may listen: its server certificate names these (consent-bank/test-ca.ts). */
const LOOPBACK_NAMES = ['127.0.0.1', 'localhost'];

const ajv = new Ajv({ allErrors: false, strict: true, useDefaults: true });
const validateSchema = ajv.compile(configSchema);

/** Whether Intl knows the zone (Node's ICU holds the IANA database). */
function isTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

function validate(config: Record<string, unknown>, sources: Map<string, Source>): void {
  if (validateSchema(config)) {
    // The outbox queues a delivery due at once, as the spec's first attempt is immediate.
    if ((config as unknown as Config).dispatcher.retryScheduleSeconds[0] !== 0) {
      const from = sources.get('dispatcher.retryScheduleSeconds');
      throw new ConfigError(
        `Invalid configuration: dispatcher.retryScheduleSeconds must start with 0 (the first attempt is immediate)${from ? ` (set by ${from.name})` : ''}.`,
      );
    }
    checkInstitutions(config as unknown as Config, sources);
    const zone = (config as unknown as Config).console.timeZone;
    if (!isTimeZone(zone)) {
      const from = sources.get('console.timeZone');
      throw new ConfigError(
        `Invalid configuration: console.timeZone must be an IANA time zone such as America/Santiago or UTC, got "${zone}"${from ? ` (set by ${from.name})` : ''}.`,
      );
    }
    for (const [i, entry] of (config as unknown as Config).api.trustProxy.entries()) {
      const problem = proxyEntryProblem(entry);
      if (problem) {
        const from = sourceOf(sources, `api.trustProxy.${i}`);
        throw new ConfigError(
          `Invalid configuration: api.trustProxy.${i} ("${entry}") ${problem}${from ? ` (set by ${from.name})` : ''}.`,
        );
      }
    }
    const bankHost = (config as unknown as Config).sandbox.consentBank.host;
    if (!LOOPBACK_NAMES.includes(bankHost)) {
      const from = sources.get('sandbox.consentBank.host');
      throw new ConfigError(
        `Invalid configuration: sandbox.consentBank.host must be ${LOOPBACK_NAMES.join(' or ')}, got "${bankHost}"${from ? ` (set by ${from.name})` : ''}: the simulated bank serves loopback only, as its sandbox users share one password and its certificate names only those hosts.`,
      );
    }
    return;
  }
  const issue = validateSchema.errors?.[0];
  if (!issue) throw new ConfigError('Invalid configuration.');
  const segments = issue.instancePath.split('/').filter(Boolean);
  if (issue.keyword === 'additionalProperties') segments.push(String(issue.params.additionalProperty));
  const key = segments.join('.') || '(root)';
  const from = sourceOf(sources, key);
  const detail = issue.keyword === 'additionalProperties' ? 'is not a known setting' : issue.message;
  throw new ConfigError(`Invalid configuration: ${key} ${detail}${from ? ` (set by ${from.name})` : ''}.`);
}

/** Who set `key`, or the list or object it is in (`banks.institutions.0.id` from `SVC_BANKS_INSTITUTIONS`). */
function sourceOf(sources: Map<string, Source>, key: string): Source | undefined {
  const parts = key.split('.');
  for (let n = parts.length; n > 0; n--) {
    const from = sources.get(parts.slice(0, n).join('.'));
    if (from) return from;
  }
  return undefined;
}

/**
 * What the schema cannot see whole: an operator institution's id must be new (neither a built-in bank's nor
 * another entry's), a connector key must name a built-in bank, and a budget key any bank of the one list. Operator institutions connect by consent
 * only, so a credential connector for one would never be used.
 */
function checkInstitutions(config: Config, sources: Map<string, Source>): void {
  const fail = (key: string, message: string) => {
    const from = sourceOf(sources, key);
    throw new ConfigError(`Invalid configuration: ${key} ${message}${from ? ` (set by ${from.name})` : ''}.`);
  };
  const seen = new Set<string>();
  for (const [i, entry] of config.banks.institutions.entries()) {
    if (BUILT_IN_BANK_IDS.includes(entry.id))
      fail(
        `banks.institutions.${i}.id`,
        `is "${entry.id}", a built-in bank's code: choose another id (built-in: ${BUILT_IN_BANK_IDS.join(', ')})`,
      );
    if (seen.has(entry.id))
      fail(`banks.institutions.${i}.id`, `is "${entry.id}", the id of an earlier entry: each id once`);
    seen.add(entry.id);
  }
  for (const bank of Object.keys(config.banks.connectors)) {
    if (seen.has(bank))
      fail(
        `banks.connectors.${bank}`,
        `names an institution of banks.institutions, which connects by consent only (svc banks register ${bank}), never through a connector`,
      );
    if (!BUILT_IN_BANK_IDS.includes(bank))
      fail(`banks.connectors.${bank}`, `names no bank: the codes are ${BUILT_IN_BANK_IDS.join(', ')}`);
  }
  // A budget may be any bank's, an operator institution's included.
  for (const bank of Object.keys(config.banks.budgets)) {
    if (!BUILT_IN_BANK_IDS.includes(bank) && !seen.has(bank))
      fail(
        `banks.budgets.${bank}`,
        `names no bank: the codes are ${[...BUILT_IN_BANK_IDS, ...seen].join(', ')}`,
      );
  }
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object') {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

/** The settings as an operator may print them: the master key never, credentials in URLs masked. */
export function describeConfig(config: Config): Record<string, unknown> {
  return {
    ...config,
    masterKey: config.masterKey ? '****' : '',
    databaseUrl: maskUrl(config.databaseUrl),
    banks: {
      ...config.banks,
      connectors: Object.fromEntries(
        Object.entries(config.banks.connectors).map(([bank, c]) => [bank, { ...c, secret: '****' }]),
      ),
      institutions: config.banks.institutions,
    },
  };
}
