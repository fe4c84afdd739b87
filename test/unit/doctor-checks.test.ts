import t from 'tap';
import {
  checkClock,
  checkConnectors,
  checkConsentClients,
  renewalCommand,
  checkSimulatedBank,
  checkDataDir,
  checkDisk,
  checkMasterKey,
  checkNode,
  checkPort,
  checkRetention,
  checkSchema,
  hasFailure,
  type MasterKeyFacts,
} from '../../src/doctor/checks.js';
import { closestCommand } from '../../src/cli/suggest.js';
import { formatTable } from '../../src/cli/views/table.js';

t.test('node: 20.17 and later pass', async (t) => {
  t.equal(checkNode('v20.17.0').status, 'ok');
  t.equal(checkNode('v22.1.0').status, 'ok');
  t.equal(checkNode('v24.0.0').status, 'ok');
  t.match(checkNode('v20.16.9'), { status: 'fail', fix: /Node\.js 20\.17 or later/ });
  t.equal(checkNode('v18.20.0').status, 'fail');
});

t.test('data directory: loose modes fail with the command that tightens them', async (t) => {
  const base = { home: '/h', exists: true, isDirectory: true, loose: [], error: null };
  t.equal(checkDataDir(base).status, 'ok');
  const loose = checkDataDir({ ...base, loose: [{ path: '/h/master.key', mode: 0o644 }] });
  t.match(loose, { status: 'fail', detail: /\/h\/master\.key 0644/, fix: /chmod -R go-rwx \/h/ });
  t.match(checkDataDir({ ...base, exists: false }), { status: 'fail', fix: /svc install/ });
});

t.test('master key: missing, loose, wrong key, right key', async (t) => {
  const base: MasterKeyFacts = {
    source: 'file',
    file: '/h/master.key',
    exists: true,
    mode: 0o600,
    error: null,
    trial: { kind: 'opened', where: 'links.credentials_encrypted' },
  };
  t.equal(checkMasterKey(base).status, 'ok');
  t.match(checkMasterKey({ ...base, exists: false }), { status: 'fail', fix: /Restore \/h\/master\.key/ });
  t.match(checkMasterKey({ ...base, mode: 0o644 }), { status: 'fail', fix: 'chmod 600 /h/master.key' });
  t.match(
    checkMasterKey({ ...base, trial: { kind: 'failed', where: 'links.credentials_encrypted', reason: 'x' } }),
    { status: 'fail', fix: /backup/ },
  );
  t.equal(checkMasterKey({ ...base, trial: { kind: 'nothing-stored' } }).status, 'ok');
  t.equal(checkMasterKey({ ...base, trial: { kind: 'not-tried', reason: 'db' } }).status, 'warn');
});

t.test('schema, ports, clock, disk, connectors', async (t) => {
  t.match(checkSchema({ applied: ['a'], pending: ['b'], unknown: [] }), {
    status: 'fail',
    fix: /svc migrate/,
  });
  t.match(checkSchema({ applied: [], pending: ['a'], unknown: [] }), { status: 'fail', fix: /svc install/ });
  t.equal(checkSchema({ applied: ['a'], pending: [], unknown: [] }).status, 'ok');
  t.equal(checkSchema(null).status, 'warn');

  const port = {
    name: 'api-port',
    setting: 'api.port',
    host: '127.0.0.1',
    port: 8080,
    detail: null,
  } as const;
  t.equal(checkPort({ ...port, state: 'free' }).status, 'ok');
  t.equal(checkPort({ ...port, state: 'ours' }).status, 'ok');
  t.match(checkPort({ ...port, state: 'taken' }), { status: 'fail', fix: /SVC_API_PORT/ });
  // svc serve starts without metrics when their port is taken, so it is a warning, not a failure.
  const metricsPort = { ...port, name: 'metrics-port', setting: 'metrics.port', port: 9464 } as const;
  t.match(checkPort({ ...metricsPort, state: 'taken' }), {
    status: 'warn',
    detail: /starts without metrics/,
    fix: /SVC_METRICS_PORT/,
  });

  t.equal(checkClock({ engine: 'postgres', offsetMs: 0, skewMs: 150 }).status, 'ok');
  t.equal(checkClock({ engine: 'postgres', offsetMs: 0, skewMs: -5_000 }).status, 'warn');
  t.match(checkClock({ engine: 'postgres', offsetMs: 0, skewMs: 90_000 }), {
    status: 'fail',
    detail: /behind/,
  });
  t.equal(checkClock({ engine: 'sqlite', offsetMs: 60_000, skewMs: null }).status, 'warn');

  const GiB = 1024 ** 3;
  t.equal(checkDisk({ path: '/', freeBytes: 50 * GiB, totalBytes: 100 * GiB, error: null }).status, 'ok');
  t.equal(checkDisk({ path: '/', freeBytes: 0.5 * GiB, totalBytes: 2 * GiB, error: null }).status, 'warn');
  t.equal(checkDisk({ path: '/', freeBytes: 40 * GiB, totalBytes: 1000 * GiB, error: null }).status, 'warn');

  t.match(checkConnectors([]), [{ status: 'ok' }]);
  const entry = { bank: 'bancochile', url: 'http://g:8090', knownBank: true, secretLength: 32 };
  t.match(checkConnectors([{ ...entry, reach: { kind: 'open' } }]), [{ status: 'ok' }]);
  t.match(checkConnectors([{ ...entry, reach: { kind: 'refused', reason: 'ECONNREFUSED' } }]), [
    { status: 'fail', fix: /Start the gateway/ },
  ]);
  t.match(checkConnectors([{ ...entry, reach: { kind: 'bad-url', reason: 'Invalid URL' } }]), [
    { status: 'fail' },
  ]);
  t.ok(hasFailure(checkConnectors([{ ...entry, knownBank: false, reach: { kind: 'open' } }])));
});

t.test('suggestions and tables', async (t) => {
  const ids = ['keys:list', 'keys:create', 'links:list', 'status', 'webhooks:endpoints'];
  t.equal(closestCommand('keys:lisst', ids), 'keys:list');
  t.equal(closestCommand('key:list', ids), 'keys:list');
  t.equal(closestCommand('stauts', ids), 'status');
  t.equal(closestCommand('frobnicate', ids), null);
  t.same(
    formatTable(
      ['ID', 'NAME'],
      [
        ['org_1', 'Acme'],
        ['org_22', 'B\u001b[2J'],
      ],
    ),
    ['ID      NAME', 'org_1   Acme', 'org_22  B\\u001b[2J'],
  );
});

t.test(
  'retention: reports what is kept; a growing kind kept forever warns, the audit log does not',
  async (t) => {
    const defaults = {
      eventsDays: 30,
      jobsDays: 14,
      bankOutcomesDays: 7,
      refreshIntentsDays: 90,
      widgetTokensDays: 7,
      auditLogDays: 0,
    };
    t.same(checkRetention(defaults), {
      check: 'retention',
      status: 'ok',
      detail:
        'events 30 d, jobs 14 d, bank outcomes 7 d, refresh intents 90 d, widget tokens 7 d, audit log kept forever; movements never pruned',
      fix: null,
    });
    t.equal(checkRetention({ ...defaults, auditLogDays: 365 }).detail.includes('audit log 365 d'), true);
    const forever = checkRetention({ ...defaults, eventsDays: 0, jobsDays: 0 });
    t.equal(forever.status, 'warn');
    t.match(forever.fix, /events, jobs grow without bound: set retention\.eventsDays, retention\.jobsDays/);
  },
);

t.test('a consent client: its certificate, key and bank, with the fix to register again', async (t) => {
  const DAY = 86_400_000;
  const now = Date.UTC(2026, 10, 28);
  const certificate = {
    subjectDn: 'CN=svc appliance,O=svc sandbox,C=CL',
    issuerDn: 'CN=svc test CA',
    notBefore: now - 10 * DAY,
    notAfter: now + 365 * DAY,
    chainLength: 1,
    chainProblem: null,
    keyMatches: true,
  };
  const client = {
    bank: 'bancoabierto',
    mode: 'test' as const,
    certificate,
    discovery: { kind: 'ok' as const },
    manageable: false,
    now,
  };
  const [healthy] = checkConsentClients([client]);
  t.match(healthy, { check: 'consent client bancoabierto (test)', status: 'ok', fix: null });
  t.match(healthy!.detail, /valid until 2027-11-28/);

  const soon = checkConsentClients([
    { ...client, certificate: { ...certificate, notAfter: now + 12 * DAY } },
  ])[0]!;
  t.match(soon, { status: 'warn', detail: /ends on 2026-12-10, in 12 days/ });
  t.match(soon.fix, /svc banks register bancoabierto --mode test/);
  t.match(soon.fix, /offers no RFC 7592 management/);

  for (const [broken, detail] of [
    [{ ...client, certificate: { ...certificate, notAfter: now - DAY } }, /expired on 2026-11-27/],
    [{ ...client, certificate: { ...certificate, notBefore: now + DAY } }, /valid only from/],
    [{ ...client, certificate: { ...certificate, keyMatches: false } }, /key does not match/],
    [
      {
        ...client,
        certificate: { ...certificate, chainProblem: 'certificate 1 of 2 is not signed by the next' },
      },
      /not signed/,
    ],
    [
      { ...client, certificate: { error: 'its private key cannot be opened with this master key' } },
      /master key/,
    ],
    [
      {
        ...client,
        gaps: [
          'the bank registered tls_client_certificate_bound_access_tokens without true (certificate-bound tokens, RFC 8705 §3.4)',
        ],
      },
      /RFC 8705 §3.4\): consents at this bank will fail/,
    ],
    [
      { ...client, discovery: { kind: 'failed' as const, reason: 'ECONNREFUSED' } },
      /discovery does not answer \(ECONNREFUSED\)/,
    ],
  ] as const) {
    const [result] = checkConsentClients([broken]);
    t.match(result, { status: 'fail', detail }, String(detail));
    t.ok(result!.fix, 'with a fix');
  }
  t.same(checkConsentClients([]), [], 'no registration, no line');
});

t.test(
  'a consent client whose bank offers RFC 7592 management: warned 30 days before its certificate ends, failed once it has, with the rotate-certificate command',
  async (t) => {
    const DAY = 86_400_000;
    const now = Date.UTC(2026, 10, 28);
    const client = (notAfter: number) => ({
      bank: 'bci',
      mode: 'live' as const,
      certificate: {
        subjectDn: 'C=CL,O=Appliance SpA,CN=svc appliance',
        issuerDn: 'CN=Some CA',
        notBefore: now - 300 * DAY,
        notAfter,
        chainLength: 2,
        chainProblem: null,
        keyMatches: true,
      },
      discovery: { kind: 'ok' as const },
      manageable: true,
      now,
    });
    const command = 'svc banks rotate-certificate bci --mode live --cert NEW_CERT.pem --key NEW_KEY.pem';
    t.match(checkConsentClients([client(now + 31 * DAY)])[0], { status: 'ok', fix: null });
    t.match(
      checkConsentClients([client(now + 30 * DAY)])[0],
      { status: 'ok' },
      '30 whole days left: not yet',
    );
    const soon = checkConsentClients([client(now + 30 * DAY - 1)])[0]!;
    t.match(soon, { status: 'warn', detail: /ends on 2026-12-27, in 29 days/ });
    t.ok(soon.fix!.endsWith(command), soon.fix!);
    const last = checkConsentClients([client(now + 1)])[0]!;
    t.match(last, { status: 'warn', detail: /in 0 days/ });
    const expired = checkConsentClients([client(now)])[0]!;
    t.match(expired, { status: 'fail', detail: /expired on 2026-11-28/ });
    t.ok(expired.fix!.endsWith(command), expired.fix!);
    t.equal(
      renewalCommand({ bank: 'bci', mode: 'test', manageable: true }).endsWith(
        'svc banks rotate-certificate bci --mode test --cert NEW_CERT.pem --key NEW_KEY.pem',
      ),
      true,
    );
  },
);

t.test(
  'the simulated consent bank: its test CA is there and in date, or the fix that makes one',
  async (t) => {
    const DAY = 86_400_000;
    const now = Date.UTC(2026, 10, 28);
    const directory = '/srv/svc/consent-bank';
    const dates = (notAfter: number) => [
      { file: 'ca.pem', notBefore: now - DAY, notAfter: now + 3650 * DAY },
      { file: 'server.pem', notBefore: now - DAY, notAfter },
      { file: 'client.pem', notBefore: now - DAY, notAfter: now + 730 * DAY },
    ];
    const facts = {
      enabled: true,
      directory,
      now,
      material: { kind: 'ok' as const, certificates: dates(now + 700 * DAY) },
    };
    t.match(checkSimulatedBank(facts), {
      check: 'consent-bank',
      status: 'ok',
      detail: `test CA in ${directory}; its certificates are valid until 2028-10-28`,
      fix: null,
    });
    t.match(checkSimulatedBank({ ...facts, enabled: false, material: { kind: 'missing' } }), {
      status: 'ok',
      detail: /enabled is false: not served/,
    });
    // Issue 44, item 7: on in an installation with live keys is worth a warning.
    t.match(checkSimulatedBank({ ...facts, liveKeys: 0, pagesAddress: '127.0.0.1:8445' }), { status: 'ok' });
    t.match(checkSimulatedBank({ ...facts, liveKeys: 2, pagesAddress: '127.0.0.1:8445' }), {
      status: 'warn',
      detail:
        'the simulated consent bank is on in an installation with 2 live API keys: its sign-in pages listen on 127.0.0.1:8445',
      fix: /set sandbox\.consentBank\.enabled to false \(SVC_SANDBOX_CONSENT_BANK_ENABLED=false\)/,
    });
    t.match(checkSimulatedBank({ ...facts, enabled: false, liveKeys: 2, material: { kind: 'missing' } }), {
      status: 'ok',
    });
    t.match(checkSimulatedBank({ ...facts, material: { kind: 'missing' } }), {
      status: 'warn',
      detail: `no test CA in ${directory}: svc serve runs without the simulated bank`,
      fix: /Run `svc install`/,
    });
    t.match(checkSimulatedBank({ ...facts, material: { kind: 'ok', certificates: dates(now + 12 * DAY) } }), {
      status: 'warn',
      detail: 'server.pem ends on 2026-12-10, in 12 days',
      fix: new RegExp(`Move ${directory} aside and run \`svc install\``),
    });
    t.match(checkSimulatedBank({ ...facts, material: { kind: 'ok', certificates: dates(now - DAY) } }), {
      status: 'fail',
      detail: "server.pem expired on 2026-11-27: the bank's TLS fails",
    });
    t.match(checkSimulatedBank({ ...facts, material: { kind: 'unreadable', reason: 'EACCES' } }), {
      status: 'fail',
      detail: /cannot be read \(EACCES\)/,
    });
  },
);
