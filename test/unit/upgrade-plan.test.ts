import t from 'tap';
import {
  backupName,
  changelogBetween,
  compareVersions,
  decide,
  diskShortfall,
  healthAddress,
  needsRollback,
  nodeMeets,
  systemdUnit,
} from '../../src/upgrade/plan.js';

/* svc upgrade's decisions (src/upgrade/plan.ts), from the facts its edges gather. */

const CHANGELOG = `# Changelog

Intro.

## [0.9.0] — 2026-12-10

### Added

- Nine.

## [0.8.2] — 2026-12-05

- Eight two.

## [0.8.1] — 2026-12-01

- Eight one.

## [0.8.0] — 2026-11-28

- Eight.

## Older

- Not a version.
`;

t.test(
  'the changelog between two versions: strictly after the first, up to and including the second',
  async (t) => {
    t.same(
      changelogBetween(CHANGELOG, '0.8.0', '0.8.2').map((entry) => entry.version),
      ['0.8.2', '0.8.1'],
    );
    const [entry] = changelogBetween(CHANGELOG, '0.8.1', '0.8.2');
    t.equal(entry!.text, '## [0.8.2] — 2026-12-05\n\n- Eight two.', 'a section is its heading and its text');
    t.same(changelogBetween(CHANGELOG, '0.8.2', '0.8.2'), [], 'nothing between a version and itself');
    t.same(
      changelogBetween('## 1.0.0\n\nPlain heading.\n', '0.9.0', '1.0.0').map((e) => e.version),
      ['1.0.0'],
      'headings without brackets too',
    );
  },
);

t.test('versions compare by semantic precedence', async (t) => {
  t.equal(compareVersions('0.10.0', '0.9.9'), 1);
  t.equal(compareVersions('0.8.0+abc', '0.8.0'), 0, 'build metadata does not count');
  t.equal(compareVersions('1.0.0-rc.1', '1.0.0'), -1, 'a pre-release comes before its release');
});

t.test('what the sources mean for the installed build', async (t) => {
  const installed = { version: '0.8.0', commit: 'aaaaaaaaaaaa', dirty: false };
  t.equal(decide(installed, { version: '0.8.1', commit: 'bbbbbbbbbbbb', dirty: false }).kind, 'upgrade');
  t.equal(
    decide(installed, { version: '0.8.0', commit: 'bbbbbbbbbbbb', dirty: false }).kind,
    'upgrade',
    'a new commit',
  );
  const same = decide(installed, { ...installed });
  t.equal(same.kind, 'nothing');
  t.match(same, { reason: /git pull/ }, 'and says to pull first');
  const older = decide(installed, { version: '0.7.0', commit: null, dirty: false });
  t.equal(older.kind, 'refuse', 'never a downgrade');
  t.match(older, { reason: /restore the backup/ });
});

t.test("Node's version against engines.node", async (t) => {
  t.ok(nodeMeets('v20.18.1', '>=20.18.1'));
  t.ok(nodeMeets('v22.1.0', '>=20.18.1'));
  t.notOk(nodeMeets('v20.17.0', '>=20.18.1'));
  t.ok(nodeMeets('v18.0.0', undefined), 'no requirement');
});

t.test('disk space for the backup and the build', async (t) => {
  const mb = 1024 ** 2;
  const facts = {
    databaseBytes: 500 * mb,
    distBytes: 30 * mb,
    homeFree: 10_000 * mb,
    checkoutFree: 10_000 * mb,
  };
  t.equal(diskShortfall({ ...facts, sameFileSystem: true }), null);
  t.match(
    diskShortfall({ ...facts, homeFree: 600 * mb, sameFileSystem: true }),
    /need about 7\d\d MB; 600 MB are free/,
  );
  t.match(diskShortfall({ ...facts, homeFree: 500 * mb, sameFileSystem: false }), /backup needs about/);
  t.match(diskShortfall({ ...facts, checkoutFree: 50 * mb, sameFileSystem: false }), /new build needs about/);
});

t.test('a systemd unit from /proc/PID/cgroup', async (t) => {
  t.equal(systemdUnit('0::/system.slice/svc.service\n'), 'svc.service');
  t.equal(systemdUnit('0::/user.slice/user-1000.slice/user@1000.service/app.slice/foo.scope\n'), null);
  t.equal(
    systemdUnit('0::/user.slice/user-1000.slice/user@1000.service\n'),
    null,
    'a user manager is not a unit of svc',
  );
  t.equal(systemdUnit('12:pids:/system.slice/svc.service\n0::/\n'), 'svc.service', 'cgroup v1');
});

t.test("where a server's /health answers", async (t) => {
  const config = { host: '127.0.0.1', port: 8080 };
  t.equal(healthAddress(['--port', '9000'], {}, config), 'http://127.0.0.1:9000');
  t.equal(healthAddress(['--port=9001', '--host', '0.0.0.0'], {}, config), 'http://127.0.0.1:9001');
  t.equal(healthAddress([], { SVC_API_PORT: '9002' }, config), 'http://127.0.0.1:9002', 'its environment');
  t.equal(healthAddress([], {}, { host: '::1', port: 8080 }), 'http://[::1]:8080');
});

t.test('steps from the swap on roll back', async (t) => {
  t.same(
    ['check', 'backup', 'stop', 'swap', 'migrate', 'start', 'health'].map((step) =>
      needsRollback(step as Parameters<typeof needsRollback>[0]),
    ),
    [false, false, false, true, true, true, true],
  );
});

t.test('the backup names both versions', async (t) => {
  t.equal(
    backupName('0.8.0+abc.dirty', '0.8.1', new Date(Date.UTC(2026, 10, 28, 17, 0, 5, 123))),
    'svc-backup-before-upgrade-0.8.0+abc.dirty-to-0.8.1-20261128T170005Z.tar.gz',
  );
});
