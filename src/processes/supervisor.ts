import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Config } from '../config/defaults.js';
import type { Logger } from '../logging/logger.js';
import { atMost, MISSED_HEARTBEATS, STOP_WAIT_MS } from './presence.js';
import type { RoleName } from './roles.js';
import type { ChildState, SupervisorState } from './status.js';

const CHILD_ENTRY = fileURLToPath(new URL('./child.js', import.meta.url));
const EX_CONFIG = 78;

interface Child extends ChildState {
  process: ChildProcess | null;
  crashes: number[];
  stderrTail: string[];
  restartTimer: NodeJS.Timeout | null;
  /** Stopped for good because the schema moved under this build: not restarted. */
  halted: boolean;
}

/**
 * This server's row in the database (presence.ts): renewed every `supervisor.heartbeatSeconds`; each beat
 * answers why the schema no longer fits this build, or null.
 */
export interface Heartbeat {
  beat(): Promise<string | null>;
}

/** The roles that write in the background, unseen by any caller: stopped when the schema moves on. */
const WORKER_ROLES: readonly RoleName[] = ['scheduler', 'dispatcher'];

/**
 * Starts one process per role, restarts a crashed one with backoff, and gives up (exit 1, with the reason)
 * when one crashes `crashLoopRestarts` times within `crashLoopWindowSeconds`. The first SIGTERM or SIGINT
 * drains the children; a second one, or the shutdown timeout, kills them.
 */
export class Supervisor {
  private readonly children: Child[];
  private readonly startedAt = new Date();
  private stopping = false;
  private failure: string | null = null;
  private finished!: (code: number) => void;
  private readonly stateFile: string;
  private announced = false;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  /** The beat in progress: the row is removed after it, never under it (which would write it again). */
  private beating: Promise<void> = Promise.resolve();
  private beatFailures = 0;
  private schemaMoved = false;

  /**
   * `onRunning` is called once, the first time every child has said it is ready. Without a `heartbeat`
   * (tests of the supervisor alone) nothing is written to the database.
   */
  constructor(
    private readonly config: Readonly<Config>,
    private readonly roles: RoleName[],
    private readonly env: Record<string, string | undefined>,
    private readonly logger: Logger,
    private readonly onRunning: () => void = () => undefined,
    private readonly heartbeat: Heartbeat | null = null,
  ) {
    this.children = roles.map((role) => ({
      role,
      pid: null,
      status: 'starting',
      started_at: null,
      restarts: 0,
      last_exit: null,
      last_exit_at: null,
      process: null,
      crashes: [],
      stderrTail: [],
      restartTimer: null,
      halted: false,
    }));
    mkdirSync(join(config.home, 'run'), { recursive: true });
    this.stateFile = join(config.home, 'run', `serve-${process.pid}.json`);
  }

  /** Resolves with the exit code once every child has stopped. */
  run(): Promise<number> {
    const done = new Promise<number>((resolve) => (this.finished = resolve));
    const onSignal = (signal: NodeJS.Signals) => {
      if (this.stopping) {
        this.logger.warn({ signal }, 'second signal: killing children');
        for (const child of this.children) child.process?.kill('SIGKILL');
        return;
      }
      this.logger.info({ signal }, 'draining');
      this.stop();
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    for (const child of this.children) this.spawn(child);
    this.scheduleBeat();
    return done.finally(async () => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      if (this.heartbeatTimer) clearTimeout(this.heartbeatTimer);
      // A beat that renews after the row's removal writes it again, to lapse after 3 heartbeats: waited for,
      // but not for long when the database is away (and then the removal fails too).
      await atMost(this.beating, STOP_WAIT_MS);
      rmSync(this.stateFile, { force: true });
    });
  }

  private scheduleBeat(): void {
    if (!this.heartbeat || this.stopping) return;
    this.heartbeatTimer = setTimeout(() => {
      this.heartbeatTimer = null;
      this.beating = this.beat().finally(() => this.scheduleBeat());
    }, this.config.supervisor.heartbeatSeconds * 1000);
  }

  private async beat(): Promise<void> {
    try {
      const problem = await this.heartbeat!.beat();
      if (this.beatFailures > 0) this.logger.info({ failed: this.beatFailures }, 'heartbeat recorded again');
      this.beatFailures = 0;
      if (problem && !this.schemaMoved && !this.stopping) this.haltWorkers(problem);
    } catch (error) {
      // Once per outage: the children say for themselves what the database's absence does to their work.
      if (this.beatFailures === 0) {
        const lapse = this.config.supervisor.heartbeatSeconds * MISSED_HEARTBEATS;
        this.logger.warn(
          { err: error },
          `could not record the heartbeat: after ${lapse} s without one, svc migrate no longer sees this server`,
        );
      }
      this.beatFailures += 1;
    }
  }

  /**
   * The database's schema no longer fits this build: a newer build migrated it (or it was rolled back). The
   * scheduler and the dispatcher would fail write after write, and a delivery whose attempt cannot be
   * recorded is sent again; they drain and stay stopped. The API keeps serving: its callers see each answer,
   * and an expand migration, the kind a newer node runs beside older ones, leaves its reads and writes
   * working. One line says so; restarting svc serve with the matching build starts them again.
   */
  private haltWorkers(problem: string): void {
    this.schemaMoved = true;
    const stopped: RoleName[] = [];
    for (const child of this.children) {
      if (!WORKER_ROLES.includes(child.role) || child.status === 'failed' || child.status === 'stopped')
        continue;
      child.halted = true;
      stopped.push(child.role);
      if (child.restartTimer) {
        clearTimeout(child.restartTimer);
        child.restartTimer = null;
      }
      if (child.process) {
        child.status = 'stopping';
        child.process.kill('SIGTERM');
      } else {
        child.status = 'stopped';
      }
    }
    this.writeState();
    setTimeout(() => {
      for (const child of this.children) {
        if (child.halted && child.process) {
          this.logger.warn({ child: child.role }, 'shutdown timeout: killing');
          child.process.kill('SIGKILL');
        }
      }
    }, this.config.supervisor.shutdownTimeoutSeconds * 1000).unref();
    const what =
      stopped.length > 0
        ? `This svc serve stopped its ${stopped.join(' and ')}`
        : 'This svc serve runs no scheduler or dispatcher';
    const api = this.roles.includes('api') ? '; its API keeps serving' : '';
    this.logger.error(
      { stopped, reason: problem },
      `${problem} ${what}${api}. Restart svc serve with the build that matches the database.`,
    );
  }

  get failureReason(): string | null {
    return this.failure;
  }

  private spawn(child: Child): void {
    const proc = fork(CHILD_ENTRY, [child.role], {
      env: { ...this.env, SVC_HOME: this.config.home },
      // Children write their JSON lines straight to our stdout (or to `log.file`): relaying every line
      // through this process cost a second process's CPU per request. Only stderr passes through us, so
      // a crash can be reported with its last words.
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    });
    child.process = proc;
    child.pid = proc.pid ?? null;
    child.status = 'starting';
    child.started_at = new Date().toISOString();
    child.stderrTail = [];
    proc.stderr?.on('data', (chunk: Buffer) => {
      process.stderr.write(chunk);
      child.stderrTail = [...child.stderrTail, ...chunk.toString().split('\n').filter(Boolean)].slice(-5);
    });
    proc.on('message', (message: { type?: string }) => {
      if (message?.type === 'ready' && child.process === proc) {
        child.status = 'running';
        this.writeState();
        if (!this.announced && !this.stopping && this.children.every((c) => c.status === 'running')) {
          this.announced = true;
          this.onRunning();
        }
      }
    });
    proc.on('exit', (code, signal) => this.onExit(child, proc, code, signal));
    this.writeState();
  }

  private onExit(child: Child, proc: ChildProcess, code: number | null, signal: NodeJS.Signals | null): void {
    if (child.process !== proc) return;
    child.process = null;
    child.pid = null;
    child.last_exit = signal ? `signal ${signal}` : `exit code ${code}`;
    child.last_exit_at = new Date().toISOString();
    if (child.halted) {
      child.status = 'stopped';
      this.writeState();
      if (this.stopping) this.finishIfAllStopped();
      return;
    }
    if (this.stopping) {
      child.status = 'stopped';
      this.writeState();
      this.finishIfAllStopped();
      return;
    }
    const now = Date.now();
    const windowMs = this.config.supervisor.crashLoopWindowSeconds * 1000;
    child.crashes = [...child.crashes.filter((at) => now - at < windowMs), now];
    const detail = child.stderrTail.at(-1);
    this.logger.error({ child: child.role, exit: child.last_exit, detail }, 'child exited unexpectedly');
    if (code === EX_CONFIG || child.crashes.length >= this.config.supervisor.crashLoopRestarts) {
      child.status = 'failed';
      this.failure =
        code === EX_CONFIG
          ? `${child.role} cannot start: ${detail ?? 'configuration or schema problem'}`
          : `${child.role} crashed ${child.crashes.length} times within ${this.config.supervisor.crashLoopWindowSeconds}s (last: ${child.last_exit}${detail ? `: ${detail}` : ''})`;
      this.logger.fatal({ reason: this.failure }, 'giving up');
      this.stop();
      return;
    }
    const delays = this.config.supervisor.restartDelaysMs;
    const delay = delays[Math.min(child.crashes.length - 1, delays.length - 1)]!;
    child.status = 'restarting';
    child.restarts += 1;
    this.writeState();
    child.restartTimer = setTimeout(() => {
      child.restartTimer = null;
      if (!this.stopping) this.spawn(child);
    }, delay);
  }

  private stop(): void {
    if (this.stopping) return;
    this.stopping = true;
    if (this.heartbeatTimer) clearTimeout(this.heartbeatTimer);
    for (const child of this.children) {
      if (child.restartTimer) clearTimeout(child.restartTimer);
      if (child.process) {
        child.status = 'stopping';
        child.process.kill('SIGTERM');
      } else if (child.status !== 'failed') {
        child.status = 'stopped';
      }
    }
    this.writeState();
    setTimeout(() => {
      for (const child of this.children) {
        if (child.process) {
          this.logger.warn({ child: child.role }, 'shutdown timeout: killing');
          child.process.kill('SIGKILL');
        }
      }
    }, this.config.supervisor.shutdownTimeoutSeconds * 1000).unref();
    this.finishIfAllStopped();
  }

  private finishIfAllStopped(): void {
    if (this.children.some((child) => child.process !== null)) return;
    this.finished(this.failure ? 1 : 0);
  }

  state(): SupervisorState {
    return {
      pid: process.pid,
      started_at: this.startedAt.toISOString(),
      roles: this.roles,
      children: this.children.map(({ role, pid, status, started_at, restarts, last_exit, last_exit_at }) => ({
        role,
        pid,
        status,
        started_at,
        restarts,
        last_exit,
        last_exit_at,
      })),
    };
  }

  /**
   * Written whole under another name, then renamed over the old file: a reader (`svc status`, a test) that
   * opened the file while it was being rewritten in place read it empty and missed a running supervisor.
   */
  private writeState(): void {
    const partial = `${this.stateFile}.partial`;
    writeFileSync(partial, JSON.stringify(this.state(), null, 2));
    renameSync(partial, this.stateFile);
  }
}
