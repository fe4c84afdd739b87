import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import t, { type Test } from 'tap';
import { freePort, REPO_ROOT, waitFor } from '../helpers/cli.js';
import { HANG_GUARD_MS, request } from '../helpers/harness.js';
import { killGroup, spawnOwned } from '../helpers/processes.js';

/**
 * install.sh as a person runs it: `./install.sh && bin/svc serve` in a shell with nothing but HOME and a
 * PATH, as a user who is not root (a user made for the test when it runs as root, otherwise the test's own
 * user with a home of its own). The checkout is a scratch copy whose node_modules and dist point at this
 * one's, with an `npm` on the PATH that records its arguments and does nothing: the test reads what
 * install.sh decides and prints, without minutes of downloads, and this checkout is left untouched.
 */

const NODE_DIR = dirname(process.execPath);
const BASE_PATH = [NODE_DIR, '/usr/local/bin', '/usr/bin', '/bin'].join(':');
const isRoot = process.getuid?.() === 0;
/** Where Node was installed with its headers (NodeSource's and Debian's packages put them there). */
const NODE_PREFIX = dirname(NODE_DIR);
const hasToolchain = ['python3', 'make', 'g++'].every(
  (tool) => spawnSync('sh', ['-c', `command -v ${tool}`]).status === 0,
);
const canMakeUser =
  isRoot &&
  spawnSync('sh', ['-c', 'command -v useradd && command -v userdel && command -v runuser']).status === 0;
const hasNodeHeaders = existsSync(join(NODE_PREFIX, 'include', 'node', 'node_api.h'));

interface Sandbox {
  root: string;
  checkout: string;
  home: string;
  fakeBin: string;
  npmLog: string;
  user: string | null;
}

function npmCalls(sandbox: Sandbox): string[] {
  return existsSync(sandbox.npmLog) ? readFileSync(sandbox.npmLog, 'utf8').split('\n').filter(Boolean) : [];
}

/**
 * A scratch checkout, a fake npm and an empty home, removed when `t` ends. With `normalUser`, when the test
 * runs as root, a user is made for it (useradd -m), whose home that is and who runs the scripts.
 */
function sandbox(t: Test, options: { normalUser?: boolean } = {}): Sandbox {
  const root = mkdtempSync(join(tmpdir(), 'svc-install-sh-'));
  chmodSync(root, 0o755);
  const checkout = join(root, 'checkout');
  mkdirSync(checkout);
  for (const entry of [
    'install.sh',
    'scripts',
    'bin',
    'commands',
    'migrations',
    'src',
    'package.json',
    'package-lock.json',
    'tsconfig.json',
    'oclif.manifest.json',
  ]) {
    cpSync(join(REPO_ROOT, entry), join(checkout, entry), { recursive: true, verbatimSymlinks: true });
  }
  for (const linked of ['node_modules', 'dist']) {
    mkdirSync(join(checkout, linked));
    for (const name of readdirSync(join(REPO_ROOT, linked))) {
      if (name === '.install-lock-hash' || name === '.install-source-hash') continue;
      symlinkSync(join(REPO_ROOT, linked, name), join(checkout, linked, name));
    }
  }
  const fakeBin = join(root, 'fake-bin');
  mkdirSync(fakeBin);
  const npmLog = join(root, 'npm.log');
  writeFileSync(join(fakeBin, 'npm'), `#!/bin/sh\necho "npm $*" >> ${npmLog}\n`, { mode: 0o755 });
  writeFileSync(npmLog, '', { mode: 0o666 });
  chmodSync(npmLog, 0o666);

  let user: string | null = null;
  const home = join(root, 'home');
  if (isRoot && options.normalUser) {
    user = `svcit${randomBytes(4).toString('hex')}`;
    const made = spawnSync('useradd', ['-m', '-d', home, '-s', '/bin/bash', user], { encoding: 'utf8' });
    if (made.status !== 0) throw new Error(`useradd failed: ${made.stderr}`);
    spawnSync('chown', ['-R', `${user}:`, checkout]);
  } else {
    mkdirSync(home);
  }
  t.teardown(() => {
    if (user) spawnSync('userdel', ['-f', '-r', user]);
    rmSync(root, { recursive: true, force: true });
  });
  return { root, checkout, home, fakeBin, npmLog, user };
}

/** `bash -c script` (or `bash -lc`, a login shell) as the sandbox's user, with only HOME, PATH and `env`. */
function shell(
  sandbox: Sandbox,
  script: string,
  options: { login?: boolean; env?: Record<string, string> } = {},
) {
  const env: Record<string, string> = {
    HOME: sandbox.home,
    PATH: `${sandbox.fakeBin}:${BASE_PATH}`,
    LANG: 'C.UTF-8',
    ...options.env,
  };
  const command = [
    'env',
    '-i',
    ...Object.entries(env).map(([name, value]) => `${name}=${value}`),
    'bash',
    options.login ? '-lc' : '-c',
    script,
  ];
  const [file, ...args] = sandbox.user ? ['runuser', '-u', sandbox.user, '--', ...command] : command;
  return spawnOwned(file!, args, { cwd: sandbox.checkout, stdio: ['ignore', 'pipe', 'pipe'] });
}

async function run(
  sandbox: Sandbox,
  script: string,
  options: { login?: boolean; env?: Record<string, string> } = {},
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = shell(sandbox, script, options);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const timer = setTimeout(() => killGroup(child.pid!, 'SIGKILL'), HANG_GUARD_MS);
  const code = await new Promise<number | null>((resolve) => child.once('close', (exit) => resolve(exit)));
  clearTimeout(timer);
  killGroup(child.pid!, 'SIGKILL');
  // eslint-disable-next-line no-control-regex -- the bold `==>` of install.sh
  const plain = (text: string) => text.replace(/\x1b\[[0-9;]*m/g, '');
  return { code, stdout: plain(stdout), stderr: plain(stderr) };
}

/** Where sqlite3's prebuilt binary would come from: a local server that has it (200) or a closed port. */
async function prebuiltHost(t: Test, available: boolean): Promise<string> {
  if (!available) return `http://127.0.0.1:${await freePort()}`;
  const server = createServer((_request, response) => response.end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const address = server.address();
  return `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
}

t.test('an old Node.js stops install.sh at once, naming what it found', async (t) => {
  const box = sandbox(t);
  writeFileSync(join(box.fakeBin, 'node'), '#!/bin/sh\necho v18.19.0\n', { mode: 0o755 });
  const result = await run(box, './install.sh');
  t.equal(result.code, 1, 'install.sh exits 1');
  t.equal(
    result.stderr,
    `install.sh: Node.js 20.17 or later is required; ${join(box.fakeBin, 'node')} is v18.19.0.\n`,
    'one line says which node and which version',
  );
  t.equal(result.stdout, '', 'before any step');
  t.same(npmCalls(box), [], 'npm was not run');
});

t.test(
  'without a toolchain or a prebuilt sqlite3, install.sh says what to install before npm runs',
  async (t) => {
    const box = sandbox(t);
    const host = await prebuiltHost(t, false);
    const result = await run(box, './install.sh', {
      env: { CXX: '/nonexistent/g++', npm_config_sqlite3_binary_host: host },
    });
    t.equal(result.code, 1, 'install.sh exits 1');
    t.match(result.stderr, /^install\.sh: sqlite3 has to be compiled on this machine/, 'it says why');
    t.match(result.stderr, new RegExp(`cannot be downloaded: ${host}/v`), 'names the download it tried');
    t.match(result.stderr, /and that needs g\+\+\./, 'names what is missing');
    t.match(result.stderr, /Install them with: apt-get install -y python3 make g\+\+\n$/, 'and the command');
    t.equal(result.stdout, '', 'before any step');
    t.same(npmCalls(box), [], 'npm was not run');
  },
);

t.test(
  `as a user who is not root${isRoot ? ' (made for the test)' : ' (this one, with a home of its own)'}, "./install.sh && bin/svc serve" works in a fresh shell, and svc is on the PATH of the next`,
  {
    skip:
      isRoot && !canMakeUser
        ? 'as root, needs useradd, userdel and runuser to make a user who is not root'
        : false,
  },
  async (t) => {
    const box = sandbox(t, { normalUser: true });
    const host = await prebuiltHost(t, true);
    const env = { npm_config_sqlite3_binary_host: host };
    const port = await freePort();
    // The quick start as printed, in a shell whose PATH does not have ~/.local/bin.
    const quickStart = shell(box, `./install.sh && SVC_METRICS_PORT=0 bin/svc serve --port ${port}`, { env });
    let stdout = '';
    quickStart.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    let stderr = '';
    quickStart.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    t.teardown(() => void killGroup(quickStart.pid!, 'SIGKILL'));
    const health = await waitFor(async () => {
      const answer = await request(`http://127.0.0.1:${port}`, 'GET', '/health').catch(() => null);
      return answer?.status === 200 ? answer : undefined;
    }, HANG_GUARD_MS);
    t.ok(health, 'bin/svc serve answers /health');
    if (!health) t.comment(`stdout:\n${stdout}\nstderr:\n${stderr}`);
    killGroup(quickStart.pid!, 'SIGTERM');

    const bin = join(box.home, '.local', 'bin');
    // eslint-disable-next-line no-control-regex -- a terminal's escape sequences
    t.notMatch(stdout, /\x1b\[/, 'output into a pipe or a log carries no terminal escapes');
    t.match(stdout, /==> Installing dependencies from package-lock\.json \(npm ci\)\n {4}took \d+ s\n/);
    t.match(stdout, /==> Building\n {4}took \d+ s\n/, 'each step says how long it took');
    t.match(stdout, new RegExp(`==> Linked ${bin}/svc\n`), 'svc is linked into ~/.local/bin');
    t.match(stdout, new RegExp(`==> Added ${bin} to PATH in ${box.home}/\\.profile\n`));
    t.match(stdout, /Test secret key {7}svc_sk_test_/, 'svc install printed the test key');
    t.match(stdout, /==> Done in \d+ s\.\n/);
    t.match(
      stdout,
      new RegExp(
        `==> ${bin} is not on this shell's PATH: open a new shell, or run: export PATH="${bin}:\\$PATH"\n`,
      ),
      'and it says how to get svc on this shell’s PATH',
    );
    t.same(npmCalls(box), ['npm ci --no-audit --no-fund', 'npm run --silent build'], 'npm ran twice');

    const profileLines = () =>
      readFileSync(join(box.home, '.profile'), 'utf8')
        .split('\n')
        .filter((line) => line.includes(bin));
    t.equal(profileLines().length, 1, '~/.profile has one line for ~/.local/bin');

    const again = await run(box, './install.sh', { env });
    t.equal(again.code, 0, 'running install.sh again succeeds');
    t.match(again.stdout, /==> Dependencies already match package-lock\.json\n==> Build is up to date\n/);
    t.match(again.stdout, /Already installed: nothing else to do/);
    t.notMatch(again.stdout, /Linked|Added/, 'and links and adds nothing');
    t.equal(npmCalls(box).length, 2, 'npm is not run again');
    t.equal(profileLines().length, 1, '~/.profile still has one line for it');

    const next = await run(box, 'command -v svc && svc --version', { login: true, env: { PATH: BASE_PATH } });
    t.equal(next.code, 0, 'a new login shell runs svc');
    t.equal(next.stdout.split('\n')[0], join(bin, 'svc'), 'from ~/.local/bin');
    t.match(next.stdout, /^svc \d+\.\d+\.\d+ \(commit [^)]+\); node v/m, 'svc --version names the build');
  },
);

t.test(
  '--production removes the build tools after the build; plain install.sh brings them back',
  async (t) => {
    const box = sandbox(t);
    const env = {
      npm_config_sqlite3_binary_host: await prebuiltHost(t, true),
      SVC_BIN_DIR: join(box.home, 'bin'),
    };
    const first = await run(box, './install.sh --production', { env });
    t.equal(first.code, 0, 'install.sh --production succeeds');
    t.match(first.stdout, /==> Removing the build tools \(npm prune --omit=dev\)[^\n]*\n {4}took \d+ s\n/);
    t.same(npmCalls(box), [
      'npm ci --no-audit --no-fund',
      'npm run --silent build',
      'npm prune --omit=dev --no-audit --no-fund',
    ]);
    const again = await run(box, './install.sh --production', { env });
    t.equal(again.code, 0, 'again');
    t.equal(npmCalls(box).length, 3, 'changes nothing');
    const developer = await run(box, './install.sh', { env });
    t.equal(developer.code, 0, 'plain install.sh afterwards succeeds');
    t.same(
      npmCalls(box).slice(3),
      ['npm ci --no-audit --no-fund'],
      'and reinstalls the whole tree, for npm test',
    );
  },
);

t.test(
  'when sqlite3 must be compiled and nodejs.org is out of reach, the headers installed with Node are used',
  {
    skip:
      hasToolchain && hasNodeHeaders
        ? false
        : `needs python3, make, g++ and ${NODE_PREFIX}/include/node (apt-get install -y python3 make g++)`,
  },
  async (t) => {
    const box = sandbox(t);
    // This npm says where node-gyp would take Node's headers from.
    writeFileSync(
      join(box.fakeBin, 'npm'),
      `#!/bin/sh\ncase "$1" in config) exit 0 ;; esac\necho "npm $* (nodedir=$npm_config_nodedir)" >> ${box.npmLog}\n`,
      { mode: 0o755 },
    );
    const closed = `http://127.0.0.1:${await freePort()}`;
    const result = await run(box, './install.sh', {
      env: {
        npm_config_sqlite3_binary_host: closed,
        NODEJS_ORG_MIRROR: closed,
        XDG_CACHE_HOME: join(box.home, 'empty-cache'),
        SVC_BIN_DIR: join(box.home, 'bin'),
      },
    });
    t.equal(result.code, 0, 'install.sh succeeds');
    t.match(
      result.stdout,
      `==> Compiling sqlite3 with the Node.js headers in ${NODE_PREFIX}/include/node\n==> Installing dependencies`,
      'it says which headers, before npm ci',
    );
    t.equal(npmCalls(box)[0], `npm ci --no-audit --no-fund (nodedir=${NODE_PREFIX})`, 'and npm ci gets them');
  },
);

/** The README's test command: the one line of its block under "To run the whole test suite". */
function readmeTestCommand(): string {
  const readme = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8');
  const block = /To run the whole test suite[\s\S]*?```sh\n([^\n]+)\n```/.exec(readme);
  if (!block) throw new Error('README.md has no test command under "To run the whole test suite"');
  return block[1]!;
}

t.test("CI runs exactly the README's test command", async (t) => {
  const command = readmeTestCommand();
  const ci = readFileSync(join(REPO_ROOT, '.ci', 'run'), 'utf8').split('\n');
  t.ok(ci.includes(command), `.ci/run has the line \`${command}\``);
});

for (const asRoot of isRoot ? [true, false] : [false]) {
  t.test(
    `where install.sh compiles sqlite3 with the headers installed with Node, the README's test command does too (${asRoot ? 'as root' : 'as a user who is not root'})`,
    {
      skip:
        !hasToolchain || !hasNodeHeaders
          ? `needs python3, make, g++ and ${NODE_PREFIX}/include/node`
          : !asRoot && isRoot && !canMakeUser
            ? 'as root, needs useradd, userdel and runuser to make a user who is not root'
            : false,
    },
    async (t) => {
      const box = sandbox(t, { normalUser: !asRoot });
      writeFileSync(
        join(box.fakeBin, 'npm'),
        `#!/bin/sh\ncase "$1" in config) exit 0 ;; esac\necho "npm $* (nodedir=$npm_config_nodedir)" >> ${box.npmLog}\n`,
        { mode: 0o755 },
      );
      // No prebuilt sqlite3 and no nodejs.org: install.sh works here (the test above); so must this.
      const closed = `http://127.0.0.1:${await freePort()}`;
      const env = {
        npm_config_sqlite3_binary_host: closed,
        NODEJS_ORG_MIRROR: closed,
        XDG_CACHE_HOME: join(box.home, 'empty-cache'),
      };
      const command = readmeTestCommand();
      const result = await run(box, command, { env });
      t.equal(result.code, 0, `\`${command}\` succeeds (${result.stderr.slice(0, 300)})`);
      t.match(
        result.stdout,
        `==> Compiling sqlite3 with the Node.js headers in ${NODE_PREFIX}/include/node`,
        'it says which headers',
      );
      t.same(
        npmCalls(box),
        [`npm ci --no-audit --no-fund (nodedir=${NODE_PREFIX})`, `npm test (nodedir=)`],
        'npm ci builds sqlite3 with them, then the tests run',
      );
    },
  );
}
