import { execFile } from 'node:child_process';
import { existsSync, readFileSync, statSync, statfsSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { createBackup, defaultBackupDirectory } from '../backup/backup.js';
import type { Config } from '../config/defaults.js';
import { openDatabase } from '../db/database.js';
import { thisBuild, buildLabel } from '../processes/build-info.js';
import { liveServeInstances } from '../processes/serve-instances.js';
import {
  backupName,
  changelogBetween,
  decide,
  describeVersion,
  diskShortfall,
  formatSeconds,
  healthAddress,
  needsRollback,
  nodeMeets,
  otherServersRefusal,
  STEP_NAMES,
  type Build,
  type ChangelogEntry,
  type StepName,
} from './plan.js';
import {
  healthAnswers,
  restartCommand,
  runningServers,
  runsFrom,
  serversOfCheckout,
  startServer,
  stopServer,
  tellTerminal,
  waitUntil,
  type RunningServer,
} from './servers.js';
import { directoryBytes, readSources, stageBuild } from './stage.js';
import { swapBack, swapIn, type Swap } from './swap.js';

const run = promisify(execFile);

/*
 * `svc upgrade` (docs/upgrade.md): check, backup, stop, swap, migrate, start, health; on a failure from the
 * swap on, everything is put back as it was and the previous build serves again. This file runs the steps in
 * order and keeps the record; the decisions are plan.ts's, the processes servers.ts's, the builds stage.ts's
 * and swap.ts's. Everything the steps need from this (the previous) build is imported above, before the swap
 * replaces dist/: the new build only ever runs in processes of its own.
 */

export interface StepRecord {
  name: StepName | `rollback:${string}`;
  ok: boolean;
  seconds: number;
  details: string[];
  error?: string;
}

export type UpgradeOutcome =
  'upgraded' | 'nothing_to_do' | 'checked' | 'failed' | 'rolled_back' | 'rollback_failed';

export interface UpgradeResult {
  outcome: UpgradeOutcome;
  from: Build & { label: string };
  to: (Build & { label: string }) | null;
  steps: StepRecord[];
  /** The archive written by the backup step. */
  backup: string | null;
  seconds: number;
  /** CHANGELOG.md's sections after `from` up to `to`. */
  changelog: ChangelogEntry[];
  /**
   * What the person must know after it: a server that ran in a terminal now runs detached, and the command
   * that has it in a terminal again.
   */
  notes: string[];
  failure?: { step: StepName; error: string; message: string };
}

export interface UpgradeOptions {
  checkout: string;
  config: Readonly<Config>;
  /** Only step 1. */
  dryRun: boolean;
  env: Record<string, string | undefined>;
  now: () => Date;
  /** A line for a person, as it happens. */
  say: (line: string) => void;
  /** How long the health step (and the rollback's) waits for /health and `svc status` (default 120 s). */
  healthTimeoutMs?: number;
}

class StepFailure extends Error {}

/** Runs svc upgrade; a failed step is in the result (`failed`, `rolled_back`), never thrown. */
export async function runUpgrade(options: UpgradeOptions): Promise<UpgradeResult> {
  const { checkout, config, say } = options;
  const home = config.home;
  const started = Date.now();
  const installed = thisBuild();
  const from = { ...installed, label: buildLabel(installed) };
  const result: UpgradeResult = {
    outcome: 'failed',
    from,
    to: null,
    steps: [],
    backup: null,
    seconds: 0,
    changelog: [],
    notes: [],
  };
  const healthTimeoutMs = options.healthTimeoutMs ?? 120_000;

  // The environment of every svc this runs: this home, whatever the shell said.
  const svcEnv = { ...options.env, SVC_HOME: home } as Record<string, string>;
  const svc = async (args: string[]) => {
    const { stdout } = await run(process.execPath, [join(checkout, 'bin', 'run.js'), ...args, '--json'], {
      cwd: checkout,
      env: svcEnv,
      maxBuffer: 64 * 1024 ** 2,
    }).catch((error: Error & { stdout?: string; stderr?: string }) => {
      let message = error.stderr?.trim() || error.message;
      try {
        message = (JSON.parse(error.stdout ?? '') as { error: { message: string } }).error.message;
      } catch {
        // not svc's JSON error: stderr says it
      }
      throw new Error(`svc ${args.join(' ')}: ${message}`);
    });
    return JSON.parse(stdout) as unknown;
  };

  async function step<T>(name: StepRecord['name'], work: (details: string[]) => Promise<T>): Promise<T> {
    const record: StepRecord = { name, ok: false, seconds: 0, details: [] };
    const begun = Date.now();
    const details: string[] = new Proxy(record.details, {
      get(target, key, receiver) {
        if (key === 'push')
          return (...lines: string[]) => {
            for (const line of lines) say(`    ${line}`);
            return target.push(...lines);
          };
        return Reflect.get(target, key, receiver) as unknown;
      },
    });
    say(`${name} …`);
    try {
      const value = await work(details);
      record.ok = true;
      return value;
    } catch (error) {
      record.error = (error as Error).message;
      throw error;
    } finally {
      record.seconds = Math.round((Date.now() - begun) / 100) / 10;
      result.steps.push(record);
      say(
        `${record.ok ? '✓' : '✗'} ${name}  ${formatSeconds(Date.now() - begun)}${record.ok ? '' : `: ${record.error}`}`,
      );
    }
  }

  // ---- 1. check
  let servers: RunningServer[] = [];
  let staged: Awaited<ReturnType<typeof stageBuild>>;
  let current: StepName = 'check';
  try {
    const plan = await step('check', async (details) => {
      const sources = await readSources(checkout);
      details.push(`installed ${describeVersion(installed)}; sources ${describeVersion(sources)}`);
      const decision = decide(installed, sources);
      if (decision.kind === 'refuse') throw new StepFailure(decision.reason);
      if (decision.kind === 'nothing') {
        details.push(decision.reason);
        return 'nothing' as const;
      }
      if (!nodeMeets(process.version, sources.engines))
        throw new StepFailure(
          `the new release needs Node.js ${sources.engines}; this is ${process.version}. Install it first (README, Installing).`,
        );
      details.push(`Node.js ${process.version} (the release needs ${sources.engines ?? 'any'})`);

      // Every svc serve of this checkout, whatever its home: the swap changes the code under all of them.
      servers = runningServers(home);
      const others = serversOfCheckout(checkout).filter((server) => server.home !== resolve(home));
      if (others.length > 0)
        throw new StepFailure(
          otherServersRefusal({
            home: resolve(home),
            homeServes: servers.length > 0,
            installed: describeVersion(installed),
            others: others.map((server) => ({
              ...server,
              restart: server.home ? restartOf(server.home, server.pid) : null,
            })),
          }),
        );

      const db = openDatabase({ url: config.databaseUrl, quiet: true });
      let databaseBytes = 0;
      try {
        await db.ping(5000).catch((error: Error) => {
          throw new StepFailure(`the database does not answer (${db.describe()}): ${error.message}`);
        });
        databaseBytes = (await db.sizeBytes()) ?? 0;
        const mine = new Set(servers.map((server) => server.pid));
        const elsewhere = (await liveServeInstances(db)).filter(
          (row) => row.host !== hostname() || !mine.has(row.pid),
        );
        if (elsewhere.length > 0)
          throw new StepFailure(
            `other servers use this database (${elsewhere.map((row) => `pid ${row.pid} on ${row.host}, svc ${row.version}`).join('; ')}): svc upgrade upgrades one box and its own home. Stop them first, or upgrade by hand (docs/upgrade.md, Several nodes).`,
          );
        details.push(`database answers: ${db.describe()}`);
      } finally {
        await db.close();
      }
      for (const server of servers)
        if (!runsFrom(server, checkout))
          throw new StepFailure(
            `svc serve pid ${server.pid} of this home runs from ${server.argv[1] ?? 'elsewhere'}, not from ${checkout}: run svc upgrade in the checkout it runs from.`,
          );
      details.push(
        servers.length === 0
          ? 'svc serve is not running on this home: it will not be started after the upgrade'
          : servers
              .map(
                (server) =>
                  `svc serve pid ${server.pid} (${server.roles.join(',')})${server.unit ? ` under systemd (${server.unit})` : ''}`,
              )
              .join('; '),
      );

      const sameFileSystem = statSync(home).dev === statSync(checkout).dev;
      const free = (path: string) => {
        const stats = statfsSync(path);
        return stats.bavail * stats.bsize;
      };
      const shortfall = diskShortfall({
        databaseBytes,
        distBytes: directoryBytes(join(checkout, 'dist')),
        homeFree: free(home),
        checkoutFree: free(checkout),
        sameFileSystem,
      });
      if (shortfall) throw new StepFailure(`not enough disk space: ${shortfall}`);
      details.push(`disk space: ${Math.floor(free(home) / 1024 ** 2)} MB free in ${home}`);

      const buildStarted = Date.now();
      staged = await stageBuild(checkout, (line) => details.push(line));
      result.to = { ...staged.build, label: buildLabel({ ...staged.build, builtAt: null }) };
      details.push(
        staged.reused
          ? `the new sources were already built in ${staged.root} (same sources): reused`
          : `built the new sources into ${staged.root} in ${formatSeconds(Date.now() - buildStarted)}`,
      );
      if (staged.stagedDependencies)
        details.push(
          'the dependencies were installed there too: they take the place of node_modules in the swap',
        );
      details.push(`will upgrade ${describeVersion(installed)} → ${describeVersion(staged.build)}`);
      return 'upgrade' as const;
    });
    if (plan === 'nothing') return finish('nothing_to_do');
    if (options.dryRun) return finish('checked');

    // ---- 2. backup
    current = 'backup';
    await step('backup', async (details) => {
      // Not encrypted: it sits in <home>/backups (0700) beside master.key, which opens it anyway; 0600.
      const out = join(defaultBackupDirectory(home), backupName(from.label, result.to!.label, options.now()));
      const backup = await createBackup({
        config,
        out,
        passphrase: null,
        svcVersion: from.label,
        env: options.env,
        now: options.now,
      });
      result.backup = backup.file;
      details.push(`${backup.file} (${Math.ceil(backup.bytes / 1024)} KB, not encrypted, mode 0600)`);
    });

    // ---- 3. stop
    current = 'stop';
    const stopped: RunningServer[] = [];
    try {
      await step('stop', async (details) => {
        if (servers.length === 0) details.push('svc serve is not running on this home: nothing to stop');
        for (const server of servers) {
          const shutdown = Number(
            server.env.SVC_SUPERVISOR_SHUTDOWN_TIMEOUT_SECONDS ?? config.supervisor.shutdownTimeoutSeconds,
          );
          // Its own shutdown timeout (the drain of in-flight work) and 15 s for its children to exit after it.
          await stopServer(server, (shutdown + 15) * 1000, (line) => details.push(line));
          stopped.push(server);
          details.push(`svc serve pid ${server.pid} stopped`);
        }
      });
    } catch (error) {
      // Nothing was swapped: what was stopped runs again as it was.
      for (const server of stopped) await startServer(server, home, options.now()).catch(() => undefined);
      throw error;
    }

    // ---- 4. swap
    current = 'swap';
    let swap: Swap | null = null;
    try {
      await step('swap', async (details) => {
        swap = swapIn(checkout, staged.stagedDependencies);
        details.push(
          `the previous build is in ${join(checkout, '.svc-upgrade', 'previous')}; ${join(checkout, 'dist')} is ${result.to!.label}`,
        );
      });

      // ---- 5. migrate
      current = 'migrate';
      await step('migrate', async (details) => {
        const { applied } = (await svc(['migrate'])) as { applied: string[] };
        details.push(applied.length ? `applied ${applied.join(', ')}` : 'no migrations to apply');
      });

      // ---- 6. start
      current = 'start';
      const startedPids: (number | null)[] = [];
      await step('start', async (details) => {
        if (servers.length === 0) details.push('svc serve was not running before the upgrade: not started');
        for (const server of servers) {
          const started = await startServer(server, home, options.now());
          startedPids.push(started.pid);
          details.push(
            server.unit
              ? `systemctl start ${server.unit}`
              : `svc serve pid ${started.pid} (${server.roles.join(',')}), its output in ${started.log}`,
          );
          if (server.terminal && started.pid) comeBack(server, started.pid, started.log, result.to!.label);
        }
      });

      // ---- 7. health
      current = 'health';
      await step('health', async (details) => {
        await checkHealth(servers, startedPids, result.to!.label, details);
      });
    } catch (error) {
      if (!needsRollback(current)) throw error;
      return await rollback(current, error as Error, swap);
    }
    return finish('upgraded');
  } catch (error) {
    result.failure = {
      step: current,
      error: (error as Error).message,
      message: `svc upgrade failed at step ${current}: ${(error as Error).message}. Nothing was changed${current === 'stop' || current === 'backup' ? '; svc serve runs as before' : ''}: the box is on ${describeVersion(installed)}.`,
    };
    return finish('failed');
  }

  /**
   * A server started in a terminal cannot be started in it again (the shell has the terminal back once it
   * stops, and Ctrl-C would reach the shell): it is started detached like the others, and both this command
   * and that terminal say so, with the command that has it in a terminal again.
   */
  function comeBack(server: RunningServer, pid: number, log: string | null, label: string): void {
    const note = `svc serve pid ${server.pid} ran in the terminal ${server.terminal}; svc upgrade started it again detached, as pid ${pid} (${label}), its output in ${log}, so Ctrl-C there no longer stops it. To run it in a terminal again: kill -TERM ${pid}; then, once it has exited: ${restartCommand(server)}`;
    result.notes.push(note);
    tellTerminal(server.terminal!, `svc upgrade: ${note}`);
  }

  function finish(outcome: UpgradeOutcome): UpgradeResult {
    result.outcome = outcome;
    result.seconds = Math.round((Date.now() - started) / 100) / 10;
    if (outcome === 'upgraded' && result.to) {
      const changelog = join(checkout, 'CHANGELOG.md');
      if (existsSync(changelog))
        result.changelog = changelogBetween(readFileSync(changelog, 'utf8'), from.version, result.to.version);
    }
    return result;
  }

  /** /health of each started server with the api role, then `svc status` names the expected build. */
  async function checkHealth(
    expected: RunningServer[],
    pids: (number | null)[],
    label: string,
    details: string[],
  ): Promise<void> {
    if (expected.length === 0) {
      const status = (await svc(['status'])) as { database: { schema_state: string } };
      details.push(`no server to check; the database's schema is ${status.database.schema_state}`);
      return;
    }
    for (const server of expected) {
      if (!server.roles.includes('api')) continue;
      const url = healthAddress(server.argv.slice(3), server.env, config.api);
      const asked = Date.now();
      await waitUntil(() => healthAnswers(url), healthTimeoutMs);
      details.push(`${url}/health answers 200 (after ${formatSeconds(Date.now() - asked)})`);
    }
    const asked = Date.now();
    await waitUntil(async () => {
      const status = (await svc(['status'])) as {
        servers: { host: string; pid: number; version: string; roles: string }[];
      };
      const here = status.servers.filter((row) => row.host === hostname());
      for (const [i, server] of expected.entries()) {
        const pid = pids[i];
        const row = here.find((candidate) =>
          pid ? candidate.pid === pid : candidate.roles === server.roles.join(','),
        );
        if (!row) return `svc status shows no server for ${pid ? `pid ${pid}` : server.roles.join(',')} yet`;
        if (row.version !== label)
          return `svc status shows pid ${row.pid} running ${row.version}, not ${label}`;
      }
      return true;
    }, healthTimeoutMs);
    details.push(
      `svc status: ${expected.length} server(s) running ${label} (after ${formatSeconds(Date.now() - asked)})`,
    );
  }

  async function rollback(failed: StepName, error: Error, swap: Swap | null): Promise<UpgradeResult> {
    const why = error.message;
    say(`Rolling back to ${describeVersion(installed)} after the failure at step ${failed}`);
    try {
      await step('rollback:stop', async (details) => {
        const started = runningServers(home);
        if (started.length === 0) details.push('no svc serve of the new build runs');
        for (const server of started) {
          await stopServer(server, (config.supervisor.shutdownTimeoutSeconds + 15) * 1000, (line) =>
            details.push(line),
          );
        }
      });
      await step('rollback:swap', async (details) => {
        if (swap) swapBack(swap);
        details.push(`${join(checkout, 'dist')} is ${from.label} again`);
      });
      if (STEP_NAMES.indexOf(failed) >= STEP_NAMES.indexOf('migrate')) {
        await step('rollback:restore', async (details) => {
          // svc restore writes a sanitised config.json; the home's own one is put back as it was.
          const configFile = join(home, 'config.json');
          const ownConfig = existsSync(configFile) ? readFileSync(configFile) : null;
          const restored = (await svc([
            'restore',
            result.backup!,
            '--force',
            '--home',
            home,
            '--database-url',
            config.databaseUrl,
          ])) as { manifest: { database: { schema_version: string | null } } };
          if (ownConfig) writeFileSync(configFile, ownConfig, { mode: 0o600 });
          details.push(
            `restored ${result.backup} with the previous build: schema ${restored.manifest.database.schema_version ?? '(empty)'}`,
          );
        });
      }
      const pids: (number | null)[] = [];
      await step('rollback:start', async (details) => {
        if (servers.length === 0) details.push('svc serve was not running before the upgrade: not started');
        for (const server of servers) {
          const started = await startServer(server, home, options.now());
          pids.push(started.pid);
          details.push(
            server.unit
              ? `systemctl start ${server.unit}`
              : `svc serve pid ${started.pid}, its output in ${started.log}`,
          );
          if (server.terminal && started.pid) comeBack(server, started.pid, started.log, from.label);
        }
      });
      await step('rollback:health', (details) => checkHealth(servers, pids, from.label, details));
    } catch (rollbackError) {
      result.failure = {
        step: failed,
        error: why,
        message: `svc upgrade failed at step ${failed}: ${why}. THE ROLLBACK FAILED too (${(rollbackError as Error).message}): put the previous build back by hand (docs/upgrade.md, Rolling back by hand); the backup is ${result.backup ?? 'not written'}.`,
      };
      return finish('rollback_failed');
    }
    result.failure = {
      step: failed,
      error: why,
      message: `svc upgrade failed at step ${failed}: ${why}. Rolled back: the box is back on ${describeVersion(installed)}${failed === 'migrate' || failed === 'start' || failed === 'health' ? ', its database restored from the backup' : ''}${servers.length ? ', serving again' : ''}.`,
    };
    return finish('rolled_back');
  }
}

/** How to start another home's server again as it ran, when this user can read it in /proc. */
function restartOf(home: string, pid: number): string | null {
  try {
    const server = runningServers(home).find((candidate) => candidate.pid === pid);
    return server ? restartCommand(server) : null;
  } catch {
    return null;
  }
}
