import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Config } from '../config/defaults.js';
import type { Database } from '../db/database.js';
import { migrationStatus, schemaMismatch } from '../db/migrations.js';
import { buildLabel, thisBuild, type BuildInfo } from './build-info.js';
import { queueDepths, type QueueDepths } from './queue-depths.js';
import { bankIntervals, type BankInterval } from '../banks/budget/capacity.js';
import { liveServeInstances } from './serve-instances.js';
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

/** A running `svc serve`, on this host or another, as the database knows it. */
export interface ServerStatus {
  host: string;
  pid: number;
  roles: string;
  /** Its build: `0.8.0+<commit>` (build-info.ts). */
  version: string;
  migration_head: string;
  started_at: string;
  /** Runs the build this CLI is: false while an upgrade is under way, or on a node left behind. */
  same_build: boolean;
}

/**
 * The schema beside this build's migrations: `behind` has migrations this build would apply (`svc migrate`),
 * `ahead` has some this build does not know (a newer svc migrated it).
 */
export type SchemaState = 'current' | 'behind' | 'ahead' | 'empty';

export interface ApplianceStatus {
  home: string;
  /** This CLI's build. */
  build: BuildInfo;
  processes: ProcessStatus[];
  servers: ServerStatus[];
  database: {
    engine: string;
    location: string;
    reachable: boolean;
    error?: string;
    schema_version: string | null;
    schema_state: SchemaState | null;
    /**
     * Whether this build runs on the schema as it is: true when `ahead` by expand migrations only (a rolling
     * upgrade under way) or `behind` by contract ones only (they wait for the previous build's last node).
     */
    schema_fits_build: boolean | null;
    pending_migrations: number;
    /** Applied migrations this build does not know. */
    unknown_migrations: string[];
    size_bytes: number | null;
  };
  queues: QueueDepths | null;
  /**
   * Each consent bank with a measured sync: its links, calls per sync and the interval its links really get
   * (the configured one, or stretched alike for all when their syncs need more calls than its budget allows).
   */
  banks: BankInterval[] | null;
}

export function schemaState(status: {
  version: string | null;
  pending: unknown[];
  unknown: unknown[];
}): SchemaState {
  if (status.version === null) return 'empty';
  if (status.unknown.length > 0) return 'ahead';
  if (status.pending.length > 0) return 'behind';
  return 'current';
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
  const build = thisBuild();
  try {
    const migrations = await migrationStatus(db);
    const label = buildLabel(build);
    const servers = (await liveServeInstances(db)).map((row) => ({
      host: row.host,
      pid: Number(row.pid),
      roles: row.roles,
      version: row.version,
      migration_head: row.migration_head,
      started_at: new Date(Number(row.started_at)).toISOString(),
      same_build: row.version === label,
    }));
    return {
      home: config.home,
      build,
      processes,
      servers,
      database: {
        engine: db.engine,
        location: db.describe(),
        reachable: true,
        schema_version: migrations.version,
        schema_state: schemaState(migrations),
        schema_fits_build: schemaMismatch(migrations) === null,
        pending_migrations: migrations.pending.length,
        unknown_migrations: migrations.unknown,
        size_bytes: await db.sizeBytes(),
      },
      queues: migrations.version ? await queueDepths(db) : null,
      banks: migrations.version ? await bankIntervals(db.reader, config) : null,
    };
  } catch (error) {
    return {
      home: config.home,
      build,
      processes,
      servers: [],
      database: {
        engine: db.engine,
        location: db.describe(),
        reachable: false,
        error: (error as Error).message,
        schema_version: null,
        schema_state: null,
        schema_fits_build: null,
        pending_migrations: 0,
        unknown_migrations: [],
        size_bytes: null,
      },
      queues: null,
      banks: null,
    };
  }
}
