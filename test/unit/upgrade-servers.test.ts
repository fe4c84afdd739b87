import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { otherServersRefusal } from '../../src/upgrade/plan.js';
import { restartCommand, serversOfCheckout } from '../../src/upgrade/servers.js';

/* svc upgrade finding every server of its checkout (issue 45, item 1): a /proc of files, and the refusal. */

/** A /proc with one process: its command line, environment, parent and stdout. */
function fakeProcess(
  proc: string,
  pid: number,
  facts: { argv: string[]; env?: Record<string, string>; ppid: number; stdout?: string },
): void {
  const dir = join(proc, String(pid));
  mkdirSync(join(dir, 'fd'), { recursive: true });
  writeFileSync(join(dir, 'cmdline'), facts.argv.join('\0') + '\0');
  if (facts.env)
    writeFileSync(
      join(dir, 'environ'),
      Object.entries(facts.env)
        .map(([name, value]) => `${name}=${value}`)
        .join('\0') + '\0',
    );
  writeFileSync(join(dir, 'stat'), `${pid} (node (svc)) S ${facts.ppid} ${pid} ${pid} 0 -1`);
  if (facts.stdout) symlinkSync(facts.stdout, join(dir, 'fd', '1'));
}

t.test(
  'a server of the checkout is found by its children, whatever its home, with its terminal',
  async (t) => {
    const root = mkdtempSync(join(tmpdir(), 'svc-proc-'));
    t.teardown(() => rmSync(root, { recursive: true, force: true }));
    const checkout = join(root, 'checkout');
    const other = join(root, 'other-checkout');
    mkdirSync(checkout);
    mkdirSync(other);
    const proc = join(root, 'proc');
    const child = (dir: string, role: string) => [
      '/usr/bin/node',
      join(dir, 'dist/src/processes/child.js'),
      role,
    ];
    // Server 100 (home demo) in a terminal: its api and scheduler.
    fakeProcess(proc, 100, {
      argv: ['/usr/bin/node', '/usr/local/bin/svc', 'serve'],
      ppid: 1,
      stdout: '/dev/pts/3',
    });
    fakeProcess(proc, 101, {
      argv: child(checkout, 'api'),
      env: { SVC_HOME: '/home/u/svc-demo' },
      ppid: 100,
    });
    fakeProcess(proc, 102, {
      argv: child(checkout, 'scheduler'),
      env: { SVC_HOME: '/home/u/svc-demo' },
      ppid: 100,
    });
    // Server 200 of another user: its children's environment cannot be read.
    fakeProcess(proc, 200, { argv: ['/usr/bin/node', 'bin/run.js', 'serve'], ppid: 1, stdout: '/var/log/x' });
    fakeProcess(proc, 201, { argv: child(checkout, 'api'), ppid: 200 });
    // Server 300 runs another checkout: not this one's business.
    fakeProcess(proc, 300, { argv: ['/usr/bin/node', 'bin/run.js', 'serve'], ppid: 1 });
    fakeProcess(proc, 301, { argv: child(other, 'api'), env: { SVC_HOME: '/srv/other' }, ppid: 300 });

    t.same(serversOfCheckout(checkout, proc), [
      { pid: 100, home: '/home/u/svc-demo', terminal: '/dev/pts/3' },
      { pid: 200, home: null, terminal: null },
    ]);
    t.same(serversOfCheckout(join(root, 'missing'), proc), [], 'no checkout, no server');
  },
);

t.test('nothing runs from the named home and one other serves: upgrade that one', async (t) => {
  const message = otherServersRefusal({
    home: '/root/.svc',
    homeServes: false,
    installed: '0.9.0',
    others: [{ pid: 4242, home: '/home/u/svc-demo', terminal: '/dev/pts/1', restart: null }],
  });
  t.match(message, 'pid 4242 of /home/u/svc-demo in the terminal /dev/pts/1');
  t.match(message, 'would leave that server on 0.9.0 in memory');
  t.match(message, 'No svc serve runs from /root/.svc');
  t.match(message, /Upgrade the one that serves: svc upgrade --home \/home\/u\/svc-demo$/);
});

t.test('servers of both homes: stop, upgrade, migrate and restart, each command given', async (t) => {
  const message = otherServersRefusal({
    home: '/root/.svc',
    homeServes: true,
    installed: '0.9.0',
    others: [
      { pid: 4242, home: '/home/u/svc-demo', terminal: null, restart: 'cd /src && node bin/run.js serve' },
      { pid: 77, home: null, terminal: null, restart: null },
    ],
  });
  t.match(message, 'kill -TERM 4242; kill -TERM 77');
  t.match(message, 'run svc upgrade --home /root/.svc again');
  t.match(message, 'svc migrate --home /home/u/svc-demo, then cd /src && node bin/run.js serve');
  t.match(message, "pid 77 of another user's data directory");
  t.notMatch(message, 'Upgrade the one that serves', 'no single home to point at');
});

t.test('the command that starts a server again as it ran; secrets from the shell', async (t) => {
  const command = restartCommand({
    cwd: '/home/u/my svc',
    argv: ['/usr/bin/node', '/home/u/my svc/bin/run.js', 'serve', '--port', '8081'],
    env: {
      PATH: '/usr/bin',
      SVC_HOME: '/home/u/svc-demo',
      SVC_MASTER_KEY: 'c2VjcmV0',
      SVC_DATABASE_URL: 'postgres://svc:pw@db/svc',
      SVC_LOG_FORMAT: 'pretty',
    },
  });
  t.equal(
    command,
    `cd '/home/u/my svc' && SVC_DATABASE_URL="$SVC_DATABASE_URL" SVC_HOME=/home/u/svc-demo SVC_MASTER_KEY="$SVC_MASTER_KEY" /usr/bin/node '/home/u/my svc/bin/run.js' serve --port 8081`,
  );
  t.notMatch(command, 'c2VjcmV0', 'the master key is not printed');
  t.notMatch(command, 'pw@', 'nor the database password');
});
