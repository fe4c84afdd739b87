import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { Test } from 'tap';
import {
  BUILT_IN_BANK_IDS,
  BUILT_IN_INSTITUTIONS,
  bankIdsOf,
  institutionsOf,
} from '../../src/banks/institutions.js';
import { ConfigError, describeConfig, envName, loadConfig } from '../../src/config/load-config.js';
import { ANDINO } from '../helpers/operator-institution.js';

function tempHome(t: Test, config?: unknown): string {
  const home = mkdtempSync(join(tmpdir(), 'svc-config-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  if (config !== undefined)
    writeFileSync(join(home, 'config.json'), typeof config === 'string' ? config : JSON.stringify(config));
  return home;
}

t.test('without a file or environment the spec defaults apply', async (t) => {
  const home = tempHome(t);
  const config = loadConfig({ home, env: {} });
  t.equal(config.home, home);
  t.equal(config.brand, 'svc');
  t.equal(config.databaseUrl, `sqlite://${home}/svc.db`);
  t.equal(config.api.port, 8080);
  t.equal(config.api.baseUrl, 'http://127.0.0.1:8080', 'the base URL follows host and port');
  t.equal(config.auth.cacheSeconds, 5);
  t.same(config.rateLimits, {
    read: { perMinute: 100, burst: 20 },
    sync_write: { perMinute: 10, burst: 5 },
    widget_tokens: { perMinute: 30, burst: 10 },
    resource_write: { perMinute: 30, burst: 10 },
    webhook_deliveries: { perMinute: 60, burst: 20 },
  });
  t.ok(Object.isFrozen(config) && Object.isFrozen(config.api), 'the result cannot be changed by accident');
});

t.test('SVC_HOME picks the data directory', async (t) => {
  const home = tempHome(t);
  t.equal(loadConfig({ env: { SVC_HOME: home } }).home, home);
  const other = tempHome(t);
  t.equal(loadConfig({ home: other, env: { SVC_HOME: home } }).home, other, '--home wins');
});

t.test('config.json in the home overrides the defaults', async (t) => {
  const home = tempHome(t, { api: { port: 9000 }, rateLimits: { read: { perMinute: 500, burst: 50 } } });
  const config = loadConfig({ home, env: {} });
  t.equal(config.api.port, 9000);
  t.equal(config.api.host, '127.0.0.1', 'siblings of a set key keep their defaults');
  t.same(config.rateLimits.read, { perMinute: 500, burst: 50 });
  t.same(config.rateLimits.sync_write, { perMinute: 10, burst: 5 });
});

t.test('SVC_* environment variables override the file', async (t) => {
  const home = tempHome(t, { api: { port: 9000 } });
  const config = loadConfig({
    home,
    env: {
      SVC_API_PORT: '9100',
      SVC_RATE_LIMITS_READ_PER_MINUTE: '250',
      SVC_RATE_LIMIT_STORE: 'database',
      SVC_SUPERVISOR_RESTART_DELAYS_MS: '[10, 20]',
      SVC_LOG_LEVEL: '',
    },
  });
  t.equal(config.api.port, 9100);
  t.same(config.rateLimits.read, { perMinute: 250, burst: 20 });
  t.equal(config.rateLimitStore, 'database');
  t.same(config.supervisor.restartDelaysMs, [10, 20]);
  t.equal(config.log.level, 'info', 'an empty variable is ignored');
  t.equal(envName(['rateLimits', 'read', 'perMinute']), 'SVC_RATE_LIMITS_READ_PER_MINUTE');
});

t.test('flags win over the environment and the file', async (t) => {
  const home = tempHome(t, { api: { port: 9000 } });
  const config = loadConfig({ home, env: { SVC_API_PORT: '9100' }, overrides: { api: { port: 9200 } } });
  t.equal(config.api.port, 9200);
  t.equal(config.api.baseUrl, 'http://127.0.0.1:9200');
});

t.test('a bad value names the key and the variable that set it', async (t) => {
  const home = tempHome(t);
  t.throws(() => loadConfig({ home, env: { SVC_API_PORT: '99999' } }), {
    name: 'ConfigError',
    message: /api\.port must be <= 65535 \(set by SVC_API_PORT\)/,
  });
  t.throws(() => loadConfig({ home, env: { SVC_API_PORT: 'eighty' } }), {
    name: 'ConfigError',
    message: /SVC_API_PORT must be a number, got "eighty"/,
  });
  t.throws(() => loadConfig({ home, env: { SVC_RATE_LIMITS_READ_PER_MINUTE: '0' } }), {
    name: 'ConfigError',
    message: /rateLimits\.read\.perMinute must be >= 1 \(set by SVC_RATE_LIMITS_READ_PER_MINUTE\)/,
  });
  t.throws(() => loadConfig({ home, env: { SVC_RATE_LIMIT_STORE: 'redis' } }), {
    name: 'ConfigError',
    message: /rateLimitStore .*\(set by SVC_RATE_LIMIT_STORE\)/,
  });
  const error = (() => {
    try {
      loadConfig({ home, env: { SVC_API_PORT: '-1' } });
    } catch (caught) {
      return caught;
    }
  })();
  t.ok(error instanceof ConfigError, 'it is a ConfigError, which the CLI maps to its exit code');
});

t.test('a bad value in config.json names the file', async (t) => {
  const home = tempHome(t, { api: { bodyLimitBytes: 10 } });
  t.throws(() => loadConfig({ home, env: {} }), {
    name: 'ConfigError',
    message: new RegExp(`api\\.bodyLimitBytes must be >= 1024 \\(set by ${join(home, 'config.json')}\\)`),
  });
});

t.test('an unknown key in config.json is refused', async (t) => {
  const top = tempHome(t, { apiPort: 9000 });
  t.throws(() => loadConfig({ home: top, env: {} }), {
    name: 'ConfigError',
    message: /apiPort is not a known setting/,
  });
  const nested = tempHome(t, { api: { prot: 9000 } });
  t.throws(() => loadConfig({ home: nested, env: {} }), {
    name: 'ConfigError',
    message: /api\.prot is not a known setting/,
  });
});

t.test('a config.json that is not a JSON object is refused', async (t) => {
  t.throws(() => loadConfig({ home: tempHome(t, '{"api": '), env: {} }), {
    name: 'ConfigError',
    message: /Cannot read .*config\.json/,
  });
  t.throws(() => loadConfig({ home: tempHome(t, '[1, 2]'), env: {} }), {
    name: 'ConfigError',
    message: /must hold a JSON object/,
  });
});

t.test('describeConfig never shows the master key or a database password', async (t) => {
  const masterKey = Buffer.alloc(32, 7).toString('base64');
  const config = loadConfig({
    home: tempHome(t),
    env: {
      SVC_MASTER_KEY: masterKey,
      SVC_DATABASE_URL: 'postgres://svc:pa55-w0rd@db.internal:5432/svc',
    },
  });
  t.equal(config.masterKey, masterKey, 'the loaded config holds the real key');
  const shown = describeConfig(config);
  t.equal(shown.masterKey, '****');
  t.equal(shown.databaseUrl, 'postgres://svc:****@db.internal:5432/svc');
  const text = JSON.stringify(shown);
  t.notMatch(text, masterKey);
  t.notMatch(text, 'pa55-w0rd');
  t.equal(
    describeConfig(loadConfig({ home: tempHome(t), env: {} })).masterKey,
    '',
    'no key, nothing to mask',
  );
});

t.test('every way the driver accepts a password in the URL is masked', async (t) => {
  const cases: [string, string][] = [
    ['postgresql://svc:p%40ss@db:5432/svc?schema=x', 'postgresql://svc:****@db:5432/svc?schema=x'],
    ['postgres://:lonely-pw@db/svc', 'postgres://:****@db/svc'],
    [
      'postgres://svc@db/svc?password=query-pw&sslmode=require',
      'postgres://svc@db/svc?password=****&sslmode=require',
    ],
    [
      'postgres://svc@db/svc?sslmode=require&PASSWORD=upper-pw',
      'postgres://svc@db/svc?sslmode=require&PASSWORD=****',
    ],
    ['postgres://svc@db:5432/svc', 'postgres://svc@db:5432/svc'],
  ];
  for (const [url, shown] of cases) {
    const config = loadConfig({ home: tempHome(t), env: { SVC_DATABASE_URL: url } });
    t.equal(describeConfig(config).databaseUrl, shown, url.replace(/-pw|%40ss/, '…'));
  }
  const sqlite = loadConfig({ home: tempHome(t), env: {} });
  t.equal(describeConfig(sqlite).databaseUrl, sqlite.databaseUrl, 'a SQLite path is shown as is');
});

t.test(
  'retention: defaults per kind, 0 keeps a kind forever, and a bad value names the setting',
  async (t) => {
    const home = tempHome(t);
    t.same(loadConfig({ home, env: {} }).retention, {
      eventsDays: 30,
      jobsDays: 14,
      bankOutcomesDays: 7,
      refreshIntentsDays: 90,
      widgetTokensDays: 7,
      auditLogDays: 0,
      grantRevocationsDays: 90,
      batchSize: 500,
      maxRowsPerPass: 20_000,
    });
    const set = loadConfig({
      home,
      env: { SVC_RETENTION_EVENTS_DAYS: '0', SVC_RETENTION_AUDIT_LOG_DAYS: '3650' },
    });
    t.equal(set.retention.eventsDays, 0, 'events kept forever');
    t.equal(set.retention.auditLogDays, 3650);
    t.throws(() => loadConfig({ home, env: { SVC_RETENTION_JOBS_DAYS: '-1' } }), {
      name: 'ConfigError',
      message: /retention\.jobsDays must be >= 0 \(set by SVC_RETENTION_JOBS_DAYS\)/,
    });
    t.throws(() => loadConfig({ home, env: { SVC_RETENTION_EVENTS_DAYS: 'a month' } }), {
      name: 'ConfigError',
      message: /SVC_RETENTION_EVENTS_DAYS must be a number, got "a month"/,
    });
    t.throws(() => loadConfig({ home: tempHome(t, { retention: { eventsDays: 1.5 } }), env: {} }), {
      name: 'ConfigError',
      message: /retention\.eventsDays must be integer/,
    });
    t.throws(() => loadConfig({ home, env: { SVC_RETENTION_BATCH_SIZE: '0' } }), {
      name: 'ConfigError',
      message: /retention\.batchSize must be >= 1 \(set by SVC_RETENTION_BATCH_SIZE\)/,
    });
    t.throws(() => loadConfig({ home: tempHome(t, { retention: { movementsDays: 30 } }), env: {} }), {
      name: 'ConfigError',
      message: /retention\.movementsDays is not a known setting/,
    });
  },
);

t.test(
  'bank codes come from one list: every built-in institution is a connector key, and nothing else is',
  async (t) => {
    const connector = { url: 'https://gateway.example.com', secret: 'a-secret-of-16-chars' };
    for (const { id } of BUILT_IN_INSTITUTIONS) {
      const config = loadConfig({
        home: tempHome(t, { banks: { connectors: { [id]: connector } } }),
        env: {},
      });
      t.same(Object.keys(config.banks.connectors), [id], `${id} is accepted`);
    }
    t.throws(
      () => loadConfig({ home: tempHome(t, { banks: { connectors: { notabank: connector } } }), env: {} }),
      {
        name: 'ConfigError',
        message: /banks\.connectors\.notabank names no bank: the codes are bancochile, /,
      },
      'a code that is no institution is refused, naming the setting and the codes',
    );
  },
);

t.test('operator institutions: added to the one list, each validated with the setting named', async (t) => {
  const config = loadConfig({ home: tempHome(t, { banks: { institutions: [ANDINO] } }), env: {} });
  t.same(
    bankIdsOf(config),
    [...BUILT_IN_BANK_IDS, 'bancoandino'],
    "the built-in banks, then the operator's, from one function",
  );
  const added = institutionsOf(config).at(-1)!;
  t.equal(added.name, 'Banco Andino');
  t.equal(added.operatorDefined, true);
  t.same(added.profile, ANDINO.profile);
  t.same(loadConfig({ home: tempHome(t), env: {} }).banks.institutions, [], 'none by default');
  const brazilian = {
    ...ANDINO,
    id: 'bancobrasilia',
    country: 'BR',
    profile: { ...ANDINO.profile, security: 'fapi1-br' },
  };
  t.equal(
    loadConfig({ home: tempHome(t, { banks: { institutions: [brazilian] } }), env: {} }).banks
      .institutions[0]!.profile.security,
    'fapi1-br',
    'a Brazilian bank with the FAPI 1.0 profile is accepted',
  );

  const refused = (entry: unknown, message: RegExp, why: string) =>
    t.throws(
      () => loadConfig({ home: tempHome(t, { banks: { institutions: [entry] } }), env: {} }),
      { name: 'ConfigError', message },
      why,
    );
  refused(
    { ...ANDINO, id: 'Banco Andino' },
    /banks\.institutions\.0\.id must match pattern/,
    'an id with capitals and a space',
  );
  refused(
    { ...ANDINO, id: 'bci' },
    /banks\.institutions\.0\.id is "bci", a built-in bank's code/,
    'a built-in code',
  );
  refused(
    { ...ANDINO, profile: { ...ANDINO.profile, security: 'fapi3' } },
    /banks\.institutions\.0\.profile\.security must be equal to one of the allowed values/,
    'an unknown security profile',
  );
  refused(
    { ...ANDINO, country: 'AR' },
    /banks\.institutions\.0\.country must be equal to one of/,
    'an unknown country',
  );
  refused(
    { ...ANDINO, connection: 'credentials' },
    /banks\.institutions\.0\.connection must be equal to constant/,
    'credentials',
  );
  refused(
    { ...ANDINO, colour: 'red' },
    /banks\.institutions\.0\.colour is not a known setting/,
    'an unknown key',
  );
  refused(
    { ...ANDINO, profile: { ...ANDINO.profile, scopes: ['x'] } },
    /banks\.institutions\.0\.profile\.scopes is not a known setting/,
    'an unknown key in the profile',
  );
  const { products: _, ...withoutProducts } = ANDINO;
  refused(withoutProducts, /banks\.institutions\.0 must have required property 'products'/, 'a missing key');
  t.throws(
    () => loadConfig({ home: tempHome(t, { banks: { institutions: [ANDINO, ANDINO] } }), env: {} }),
    {
      name: 'ConfigError',
      message: /banks\.institutions\.1\.id is "bancoandino", the id of an earlier entry/,
    },
    'the same id twice',
  );
  t.throws(
    () =>
      loadConfig({
        home: tempHome(t, {
          banks: {
            institutions: [ANDINO],
            connectors: {
              bancoandino: { url: 'https://gateway.example.com', secret: 'a-secret-of-16-chars' },
            },
          },
        }),
        env: {},
      }),
    {
      name: 'ConfigError',
      message:
        /banks\.connectors\.bancoandino names an institution of banks\.institutions, which connects by consent only/,
    },
    'a credential connector for an operator institution',
  );
  t.throws(
    () =>
      loadConfig({
        home: tempHome(t),
        env: { SVC_BANKS_INSTITUTIONS: JSON.stringify([{ ...ANDINO, id: 'santander' }]) },
      }),
    {
      name: 'ConfigError',
      message: /banks\.institutions\.0\.id is "santander".*\(set by SVC_BANKS_INSTITUTIONS\)/,
    },
    'set from the environment, the error names the variable',
  );
});

t.test('the simulated consent bank: on, loopback 8443 by default; any other host refused', async (t) => {
  const home = tempHome(t);
  t.same(loadConfig({ home, env: {} }).sandbox.consentBank, { enabled: true, host: '127.0.0.1', port: 8443 });
  const set = loadConfig({
    home,
    env: {
      SVC_SANDBOX_CONSENT_BANK_ENABLED: 'false',
      SVC_SANDBOX_CONSENT_BANK_HOST: 'localhost',
      SVC_SANDBOX_CONSENT_BANK_PORT: '0',
    },
  });
  t.same(set.sandbox.consentBank, { enabled: false, host: 'localhost', port: 0 }, 'each from its variable');
  t.throws(
    () => loadConfig({ home, env: { SVC_SANDBOX_CONSENT_BANK_HOST: '0.0.0.0' } }),
    new ConfigError(
      'Invalid configuration: sandbox.consentBank.host must be 127.0.0.1 or localhost, got "0.0.0.0" (set by SVC_SANDBOX_CONSENT_BANK_HOST): the simulated bank serves loopback only, as its sandbox users share one password and its certificate names only those hosts.',
    ),
    'a public address is refused, naming the variable',
  );
  const fromFile = tempHome(t, { sandbox: { consentBank: { host: '192.168.1.5' } } });
  t.throws(
    () => loadConfig({ home: fromFile, env: {} }),
    /sandbox\.consentBank\.host must be 127\.0\.0\.1 or localhost, got "192\.168\.1\.5" \(set by .*config\.json\)/,
  );
  t.throws(
    () => loadConfig({ home, env: { SVC_SANDBOX_CONSENT_BANK_PORT: '70000' } }),
    /sandbox\.consentBank\.port must be <= 65535/,
  );
});

t.test(
  "the console's time zone: America/Santiago by default, any IANA zone, anything else refused",
  async (t) => {
    const home = tempHome(t);
    t.equal(loadConfig({ home, env: {} }).console.timeZone, 'America/Santiago');
    t.equal(loadConfig({ home, env: { SVC_CONSOLE_TIME_ZONE: 'UTC' } }).console.timeZone, 'UTC');
    t.throws(
      () => loadConfig({ home, env: { SVC_CONSOLE_TIME_ZONE: 'Chile/Santiagoo' } }),
      new ConfigError(
        'Invalid configuration: console.timeZone must be an IANA time zone such as America/Santiago or UTC, got "Chile/Santiagoo" (set by SVC_CONSOLE_TIME_ZONE).',
      ),
      'a zone Intl does not know is refused, naming the variable',
    );
  },
);
