import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { otherHomeHint, servesOnThisMachine } from '../../src/processes/other-homes.js';
import { installedHome, runCli, startServe } from '../helpers/cli.js';

/**
 * The quick start serves ~/.svc and the guide ~/svc-demo: a command run without --home acts on the one the
 * server does not serve. Whenever the CLI finds nothing, it names the data directory it looked in and, when a
 * `svc serve` of another one runs on this machine, says so and how to point at it.
 */

t.test('servers on this machine are found by their children in /proc', async (t) => {
  const proc = mkdtempSync(join(tmpdir(), 'svc-proc-'));
  t.teardown(() => rmSync(proc, { recursive: true, force: true }));
  const fake = (pid: number, ppid: number, argv: string[], env: string[]) => {
    mkdirSync(join(proc, String(pid)));
    writeFileSync(join(proc, String(pid), 'cmdline'), argv.join('\0') + '\0');
    writeFileSync(join(proc, String(pid), 'environ'), env.join('\0') + '\0');
    writeFileSync(join(proc, String(pid), 'stat'), `${pid} (node (svc)) S ${ppid} ${pid} ${pid} 0`);
  };
  const child = ['/usr/bin/node', '/opt/svc/dist/src/processes/child.js'];
  fake(101, 100, [...child, 'api'], ['PATH=/usr/bin', 'SVC_HOME=/home/ana/svc-demo']);
  fake(102, 100, [...child, 'scheduler'], ['SVC_HOME=/home/ana/svc-demo']);
  fake(201, 200, [...child, 'api'], ['SVC_HOME=/home/ana/.svc']);
  fake(300, 1, ['/usr/bin/node', '/opt/svc/bin/run.js', 'serve'], ['SVC_HOME=/x']);
  mkdirSync(join(proc, 'self'));
  t.same(servesOnThisMachine(proc), [
    { pid: 100, home: '/home/ana/svc-demo' },
    { pid: 200, home: '/home/ana/.svc' },
  ]);
  const serves = [{ pid: 100, home: '/home/ana/svc-demo' }];
  t.equal(
    otherHomeHint('/home/ana/.svc', serves),
    'No svc serve runs from /home/ana/.svc, but one runs on this machine from /home/ana/svc-demo (pid 100): add --home /home/ana/svc-demo (or export SVC_HOME=/home/ana/svc-demo) to act on it.',
  );
  t.equal(otherHomeHint('/home/ana/svc-demo', serves), null, 'nothing to say where the server runs');
  t.equal(otherHomeHint('/home/ana/.svc', []), null, 'or where none runs at all');
  t.equal(servesOnThisMachine(join(proc, 'missing')).length, 0, 'no /proc: nothing found');
});

t.test('with a server of another home running, the CLI says where it looked and where to look', async (t) => {
  const served = await installedHome(t, 'sqlite');
  const serve = await startServe(t, { home: served.home });
  const other = await installedHome(t, 'sqlite');
  // Test files run side by side, so other servers may be listed too: this one is among them, and the pointer
  // names one of the listed homes (the first) both ways.
  const listed = `${served.home} (pid ${serve.pid})`;
  const pointer = /add --home (\S+) \(or export SVC_HOME=\1\) to act on (it|one)/;
  const oneLine = (text: string) => text.replace(/\s+/g, ' ');

  const empty = await runCli(['links', 'list'], { home: other.home });
  t.equal(empty.code, 0);
  t.match(oneLine(empty.stdout), `No links match (data directory ${other.home}).`, 'names where it looked');
  t.match(oneLine(empty.stdout), listed, 'and the server that runs');
  t.match(oneLine(empty.stdout), pointer, 'and how to point at it');

  const missing = await runCli(['links', 'inspect', 'link_0123456789abcdef'], { home: other.home });
  t.equal(missing.code, 4, 'not found');
  t.match(missing.message, `No link link_0123456789abcdef`);
  t.match(missing.message, `Looked in data directory ${other.home}.`);
  t.match(oneLine(missing.message), listed);
  t.match(oneLine(missing.message), pointer);

  const nowhere = mkdtempSync(join(tmpdir(), 'svc-nowhere-'));
  t.teardown(() => rmSync(nowhere, { recursive: true, force: true }));
  const notInstalled = await runCli(['keys', 'list'], { home: nowhere });
  t.equal(notInstalled.code, 78);
  t.match(notInstalled.message, `No svc installation in ${nowhere}`);
  t.match(oneLine(notInstalled.message), listed);
  t.match(oneLine(notInstalled.message), pointer, 'points at the running server');

  const servedList = await runCli(['webhooks', 'endpoints'], { home: served.home });
  t.match(servedList.stdout, `No webhook endpoints (data directory ${served.home}).`);
  t.notMatch(servedList.stdout, /No svc serve runs from/, 'no pointer where the server runs');
});
