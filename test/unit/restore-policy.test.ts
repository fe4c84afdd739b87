import t from 'tap';
import { sanitiseConfig } from '../../src/backup/archived-config.js';
import { defaultConfig } from '../../src/config/defaults.js';
import {
  RESTORE_POLICY,
  operatorSettings,
  restoreDecision,
  settingLeaves,
} from '../../src/config/restore-policy.js';
import { configSchema } from '../../src/config/schema.js';

/*
 * Issue 44, item 3: a restore takes no setting from an archive that decides where secrets, bank logins or
 * traffic go, or which key opens them, unless the operator names it; and every setting of the schema has
 * a decision in one place (src/config/restore-policy.ts).
 */

t.test('every setting of the schema has a restore decision, and every decision a setting', async (t) => {
  const leaves = settingLeaves();
  t.ok(leaves.length > 80, `${leaves.length} settings`);
  const undecided = leaves.filter((leaf) => !Object.hasOwn(RESTORE_POLICY, leaf));
  t.same(
    undecided,
    [],
    'a setting added to src/config/schema.ts needs a decision in src/config/restore-policy.ts',
  );
  const stale = Object.keys(RESTORE_POLICY).filter((key) => !leaves.includes(key));
  t.same(stale, [], 'the policy names no setting the schema lacks');
});

t.test('a setting added without a decision is found, and set aside meanwhile', async (t) => {
  const grown = structuredClone(configSchema) as unknown as {
    properties: Record<string, { properties: Record<string, unknown> }>;
  };
  grown.properties.webhooks!.properties.relayUrl = { type: 'string' };
  const leaves = settingLeaves(grown as never);
  t.ok(leaves.includes('webhooks.relayUrl'), 'a nested setting is a leaf of its own');
  t.notOk(Object.hasOwn(RESTORE_POLICY, 'webhooks.relayUrl'));
  t.equal(restoreDecision('webhooks.relayUrl').take, 'operator', 'never taken from an archive');
});

t.test('what decides where secrets, bank logins or traffic go is set aside', async (t) => {
  for (const key of [
    'banks.connectors',
    'masterKey',
    'webhooks.allowPrivateAddresses',
    'webhooks.allowPrivateAddressesInTestMode',
    'api.host',
    'api.baseUrl',
    'metrics.host',
    'widget.allowedRedirectUris',
    'widget.logoUrl',
    'sandbox.consentBank.host',
    'clockOffsetMs',
  ])
    t.equal(restoreDecision(key).take, 'operator', key);
  for (const key of ['home', 'databaseUrl', 'masterKeyFile'])
    t.equal(restoreDecision(key).take, 'target', key);
  t.equal(restoreDecision('widget.allowedOrigins').take, 'archive', 'an origin list only narrows the widget');
});

const hostile = {
  masterKey: Buffer.alloc(32, 7).toString('base64'),
  api: { host: '0.0.0.0', port: 9090 },
  webhooks: { allowPrivateAddresses: true, secretRollGraceSeconds: 60 },
  widget: {
    name: 'Acme',
    allowedRedirectUris: ['https://evil.example/cb'],
    allowedOrigins: ['https://app.example'],
  },
  banks: {
    connectors: { bci: { url: 'https://user:pw@gw.evil.example', secret: 'archive-connector-secret-1234' } },
    budget: { perSecond: 3 },
  },
};

t.test('the archive keeps what it may; the rest is listed with both values, secrets hidden', async (t) => {
  const { config, dropped, kept } = sanitiseConfig(structuredClone(hostile), '/old', '/new');
  t.same(config, {
    api: { port: 9090 },
    webhooks: { secretRollGraceSeconds: 60 },
    widget: { name: 'Acme', allowedOrigins: ['https://app.example'] },
    banks: { budget: { perSecond: 3 } },
  });
  t.same(kept, []);
  t.same(dropped.map((setting) => setting.key).sort(), [
    'api.host',
    'banks.connectors',
    'masterKey',
    'webhooks.allowPrivateAddresses',
    'widget.allowedRedirectUris',
  ]);
  const connectors = dropped.find((setting) => setting.key === 'banks.connectors')!;
  t.match(connectors, {
    reason: /bank logins/,
    archived: { bci: { url: 'https://user:****@gw.evil.example', secret: '(not shown)' } },
    restored: {},
    keep: '--keep-config banks.connectors',
  });
  t.match(
    dropped.find((setting) => setting.key === 'masterKey'),
    {
      archived: '(set, not shown)',
      restored: '(not set)',
    },
  );
  t.match(
    dropped.find((setting) => setting.key === 'api.host'),
    { archived: '0.0.0.0', restored: '127.0.0.1' },
  );
  t.notMatch(JSON.stringify(dropped), /archive-connector-secret|:pw@|BwcH/, 'no secret in what is listed');
});

t.test('--keep-config takes a set-aside setting by name, and only it', async (t) => {
  const { config, dropped, kept } = sanitiseConfig(structuredClone(hostile), '/old', '/new', {
    keep: ['banks.connectors'],
  });
  t.same((config.banks as Record<string, unknown>).connectors, hostile.banks.connectors);
  t.same(kept, [
    {
      key: 'banks.connectors',
      value: { bci: { url: 'https://user:****@gw.evil.example', secret: '(not shown)' } },
    },
  ]);
  t.notOk('masterKey' in config);
  t.ok(dropped.some((setting) => setting.key === 'masterKey'));
});

t.test(
  "over an installation (--force), its own values stay; an archive's equal value is no news",
  async (t) => {
    const current = {
      api: { host: '10.0.0.5' },
      banks: { connectors: { bci: { url: 'https://gw.internal', secret: 'operator-secret-12345678' } } },
    };
    const { config, dropped } = sanitiseConfig(
      { api: { host: '10.0.0.5' }, banks: hostile.banks, webhooks: { allowPrivateAddresses: false } },
      '/old',
      '/new',
      { current },
    );
    t.same(config, {
      api: { host: '10.0.0.5' },
      banks: { budget: { perSecond: 3 }, connectors: current.banks.connectors },
      webhooks: {},
    });
    t.same(
      dropped.map((setting) => setting.key),
      ['banks.connectors'],
      'a value equal to the restored one is not listed',
    );
    t.match(dropped[0], { restored: { bci: { url: 'https://gw.internal', secret: '(not shown)' } } });
  },
);

t.test('keys an archive makes up are dropped as data, whatever their name', async (t) => {
  const archived = JSON.parse(
    '{"__proto__": {"polluted": true}, "toString": 1, "constructor": {}, "home": "/x", "brand": "acme"}',
  ) as Record<string, unknown>;
  const { config, dropped } = sanitiseConfig(archived, '/old', '/new');
  t.same(config, { brand: 'acme' });
  t.same(
    dropped.map((setting) => [setting.key, setting.reason]),
    [
      ['__proto__', 'not a setting of this svc'],
      ['toString', 'not a setting of this svc'],
      ['constructor', 'not a setting of this svc'],
      ['home', 'the data directory is the one restored into'],
    ],
  );
  t.equal(({} as Record<string, unknown>).polluted, undefined);
});

t.test('each set-aside setting defaults to the closed value', async (t) => {
  const defaults = defaultConfig('/new') as unknown as Record<string, Record<string, unknown>>;
  t.same(operatorSettings().sort(), [
    'api.baseUrl',
    'api.host',
    'api.trustProxy',
    'banks.connectors',
    'clockOffsetMs',
    'masterKey',
    'metrics.host',
    'sandbox.consentBank.host',
    'webhooks.allowPrivateAddresses',
    'webhooks.allowPrivateAddressesInTestMode',
    'widget.allowedRedirectUris',
    'widget.logoUrl',
  ]);
  t.same(defaults.banks!.connectors, {});
  t.equal(defaults.masterKey, '');
  t.equal(defaults.api!.host, '127.0.0.1');
  t.same(defaults.api!.trustProxy, []);
  t.equal(defaults.webhooks!.allowPrivateAddresses, false);
  t.same(defaults.widget!.allowedRedirectUris, []);
});

t.test("a log file of the archive never lands on one of svc's own files", async (t) => {
  for (const name of ['master.key', 'config.json', 'svc.db', 'svc.db-wal', 'backups/x.log']) {
    const { config, dropped } = sanitiseConfig({ log: { file: `/old/${name}` } }, '/old', '/new');
    t.same(config, { log: {} }, name);
    t.match(dropped, [{ key: 'log.file', reason: /svc's own file/ }]);
  }
  const { config } = sanitiseConfig({ log: { file: '/old/logs/svc.log' } }, '/old', '/new');
  t.same(config, { log: { file: '/new/logs/svc.log' } }, 'a log file inside the home moves with it');
});
