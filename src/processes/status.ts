import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/defaults.js';
import type { Database } from '../db/database.js';
import { migrationStatus } from '../db/migrations.js';
import { queueDepths, type QueueDepths } from './queue-depths.js';
import type { RoleName } from './roles.js';

/* The state file each `svc serve` keeps under `<home>/run` (supervisor.ts writes it, this file reads it). */

export type ChildStatus = 'starting' | 'running' | 'restarting' | 'stopping' | 'stopped' | 'failed';

export interface ChildState {
  role: RoleName;
  pid: number | null;
  status: ChildStatus;
  started_at: string | null;
  restarts: number;
  last_exit: string | null;
  /** When the supervisor saw the last exit: with the next `started_at`, how long a restart took. */
  last_exit_at: string | null;
}

export interface SupervisorState {
  pid: number;
  started_at: string;
  roles: RoleName[];
  children: ChildState[];
}

export interface ProcessStatus {
  supervisor_pid: number;
  role: string;
  pid: number | null;
  status: string;
  uptime_seconds: number | null;
  restarts: number;
  last_exit: string | null;
  last_exit_at: string | null;
  /** When this process started (ISO 8601), as the supervisor saw it. */
  started_at: string | null;
}

export interface ApplianceStatus {
  home: string;
  processes: ProcessStatus[];
  database: {
    engine: string;
    location: string;
    reachable: boolean;
    error?: string;
    schema_version: string | null;
    pending_migrations: number;
    size_bytes: number | null;
  };
  queues: QueueDepths | null;
}

export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The supervisors running from this home, read from their state files; stale files are removed. */
export function runningSupervisors(home: string): SupervisorState[] {
  const dir = join(home, 'run');
  if (!existsSync(dir)) return [];
  const states: SupervisorState[] = [];
  for (const file of readdirSync(dir).filter((name) => /^serve-\d+\.json$/.test(name))) {
    try {
      const state = JSON.parse(readFileSync(join(dir, file), 'utf8')) as SupervisorState;
      if (isAlive(state.pid)) states.push(state);
      else rmSync(join(dir, file), { force: true });
    } catch {
      // removed between the listing and the read (its supervisor stopped)
    }
  }
  return states;
}

/**
 * The processes, the database and the queues. The caller opens the database (and has checked that it
 * answers: `svc status` stops with one line when it does not); a later refresh of `--watch` during an
 * outage shows it as unreachable instead.
 */
export async function collectStatus(
  config: Readonly<Config>,
  db: Database,
  now = Date.now(),
): Promise<ApplianceStatus> {
  const processes = runningSupervisors(config.home).flatMap((state) =>
    state.children.map((child) => ({
      supervisor_pid: state.pid,
      role: child.role,
      pid: child.pid,
      status: child.status,
      uptime_seconds:
        child.started_at && child.pid
          ? Math.max(0, Math.round((now - Date.parse(child.started_at)) / 1000))
          : null,
      restarts: child.restarts,
      last_exit: child.last_exit,
      last_exit_at: child.last_exit_at ?? null,
      started_at: child.started_at,
    })),
  );
  try {
    const migrations = await migrationStatus(db);
    return {
      home: config.home,
      processes,
      database: {
        engine: db.engine,
        location: db.describe(),
        reachable: true,
        schema_version: migrations.version,
        pending_migrations: migrations.pending.length,
        size_bytes: await db.sizeBytes(),
      },
      queues: migrations.version ? await queueDepths(db) : null,
    };
  } catch (error) {
    return {
      home: config.home,
      processes,
      database: {
        engine: db.engine,
        location: db.describe(),
        reachable: false,
        error: (error as Error).message,
        schema_version: null,
        pending_migrations: 0,
        size_bytes: null,
      },
      queues: null,
    };
  }
}
