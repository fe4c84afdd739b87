import { createHash } from 'node:crypto';
import { hostname } from 'node:os';
import { CliError } from '../errors/cli-error.js';
import type { Database } from '../db/database.js';
import {
  applicableNow,
  migrationKinds,
  migrationNames,
  migrationStatus,
  schemaMismatch,
  type Deferral,
  type MigrationKind,
  type SchemaChange,
} from '../db/migrations.js';
import type { RoleName } from './roles.js';
import {
  liveServeInstances,
  newServeInstanceId,
  registerServeInstance,
  removeServeInstance,
  renewServeInstance,
  type LiveServeInstance,
  type ServeInstance,
} from './serve-instances.js';
import { runningSupervisors } from './status.js';

/**
 * How many heartbeats a server may miss before it stops counting. One missed beat is a slow database or a
 * busy machine; three in a row (15 s at the default 5 s) is a server that is gone. A killed server holds a
 * migration back that long, and no longer.
 */
export const MISSED_HEARTBEATS = 3;

/** How long a stopping server waits for the database to take its row away (and for a beat in flight). */
export const STOP_WAIT_MS = 2000;

/** `work`'s value, or undefined once `ms` have passed; a failure of `work` within them is thrown. */
export async function atMost<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), ms)));
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** What a server of this code expects of the database, captured once: an install under it replaces dist/. */
export interface Build {
  version: string;
  migrations: readonly string[];
  /** Each migration's kind as the build declares it: which pending ones it runs before. */
  kinds: Readonly<Record<string, MigrationKind>>;
  head: string;
  /** The first 16 hex of SHA-256 over the migration names: the same set, the same schema. */
  digest: string;
}

export async function currentBuild(
  version: string,
  migrations: readonly string[] = migrationNames(),
): Promise<Build> {
  const digest = createHash('sha256').update(migrations.join('\n')).digest('hex').slice(0, 16);
  return {
    version,
    migrations: [...migrations],
    kinds: await migrationKinds(migrations),
    head: migrations.at(-1) ?? '(none)',
    digest,
  };
}

/**
 * This `svc serve` in the database: registered when it starts, renewed by `beat`, removed by `stop`. Each beat
 * also compares the database's migrations with the build's, so a server whose schema was moved on under it
 * learns so within a heartbeat.
 */
export class ServePresence {
  private row: ServeInstance | null = null;
  private readonly lapseMs: number;

  constructor(
    private readonly db: Database,
    private readonly build: Build,
    private readonly roles: readonly RoleName[],
    heartbeatSeconds: number,
  ) {
    this.lapseMs = heartbeatSeconds * 1000 * MISSED_HEARTBEATS;
  }

  async start(): Promise<void> {
    this.row = await registerServeInstance(
      this.db,
      newServeInstanceId(),
      {
        host: hostname().slice(0, 255),
        pid: process.pid,
        roles: this.roles.join(','),
        version: this.build.version.slice(0, 64),
        migration_head: this.build.head,
        migrations_digest: this.build.digest,
      },
      this.lapseMs,
    );
  }

  /** Renews this server's row; returns why the schema no longer fits this build, or null. */
  async beat(): Promise<string | null> {
    if (this.row) await renewServeInstance(this.db, this.row, this.lapseMs);
    return schemaMismatch(await migrationStatus(this.db, this.build.migrations, this.build.kinds));
  }

  /**
   * Removes the row (a clean stop frees a migration at once) and closes the database. Waits for the database
   * at most `STOP_WAIT_MS`: with it away, a stop must not wait out the pool's 10 s, and the row lapses anyway.
   */
  async stop(): Promise<void> {
    try {
      if (this.row) await atMost(removeServeInstance(this.db, this.row.id), STOP_WAIT_MS);
    } finally {
      await this.db.close();
    }
  }
}

/**
 * The guard of `svc migrate` and `svc install` (src/db/migrations.ts `guard`). Under a live server of another
 * build it lets the pending expand migrations before the first contract one apply (that build runs on their
 * schema) and defers the rest, naming each server and the way on; it refuses a rollback while any server is
 * live. The database's rows say which servers run, wherever they run. A database from before the rows (the
 * first upgrade to a build that writes them), or a server whose row lapsed while it runs, is covered only on
 * this host and home: the state files `svc serve` has always written under `<home>/run`. Such a server's
 * build is unknown, so nothing is applied under it.
 */
export function refuseUnderRunningServers(
  db: Database,
  build: Build,
  home: string,
  command: string,
): (change: SchemaChange) => Promise<Deferral | null> {
  return async (change) => {
    const live = await liveServeInstances(db);
    const host = hostname();
    const recorded = (pid: number) => live.some((row) => row.host === host.slice(0, 255) && row.pid === pid);
    const others =
      change.kind === 'rollback' ? live : live.filter((row) => row.migrations_digest !== build.digest);
    const unrecorded = runningSupervisors(home).filter((state) => !recorded(state.pid));
    const described = [
      ...others.map(describeInstance),
      ...unrecorded.map(
        (state) =>
          `pid ${state.pid} on ${host}, a build that records no heartbeat (from before they were written, or cut off from the database), since ${state.started_at}`,
      ),
    ];
    if (described.length === 0) return null;
    const count = described.length;
    const lapses = [...new Set(others.map((row) => Math.round((row.expires_at - row.heartbeat_at) / 1000)))];
    const lapseLine =
      lapses.length > 0
        ? `A server killed without stopping counts until ${lapses.map((s) => `${s} s`).join(' or ')} after its last heartbeat.`
        : '';
    if (change.kind === 'migrate' && unrecorded.length === 0) {
      const { deferred } = applicableNow(change.pending, change.kinds, true);
      return {
        deferred,
        error: (applied) =>
          new CliError(
            'server_running',
            deferralMessage(applied, deferred, described, command, lapseLine),
            75,
            { applied, deferred },
          ),
      };
    }
    throw new CliError(
      'server_running',
      [
        `${count === 1 ? 'svc serve' : `${count} svc serve processes`}${change.kind === 'rollback' ? '' : ' of another build'} ${count === 1 ? 'is' : 'are'} using this database: ${described.join('; ')}.`,
        `${change.kind === 'rollback' ? 'Rolling back' : 'Migrating'} under ${count === 1 ? 'it' : 'them'} would break ${count === 1 ? 'its' : 'their'} writes.`,
        `Stop ${count === 1 ? 'it' : 'them'} first (\`systemctl stop svc\`, or Ctrl-C or SIGTERM to \`svc serve\`), then run \`${command}\`, then start the build that matches the schema.`,
        lapseLine,
      ]
        .filter(Boolean)
        .join(' '),
      75,
      change.kind === 'migrate' ? { applied: [], deferred: change.pending } : undefined,
    );
  };
}

/**
 * One line: what applied (expand), what waits (from the first contract migration on) and for which servers,
 * and to run the command again once the last of them is replaced.
 */
export function deferralMessage(
  applied: readonly string[],
  deferred: readonly string[],
  described: readonly string[],
  command: string,
  lapseLine: string,
): string {
  const count = described.length;
  const them = count === 1 ? 'it' : 'them';
  return [
    applied.length > 0
      ? `Applied ${applied.join(', ')} (expand: the running build works on the schema ${applied.length === 1 ? 'it makes' : 'they make'}).`
      : 'Nothing was applied.',
    `${count === 1 ? 'svc serve' : `${count} svc serve processes`} of another build ${count === 1 ? 'is' : 'are'} using this database: ${described.join('; ')}.`,
    deferred.length === 1
      ? `${deferred[0]} waits: a contract migration, which that build breaks on.`
      : `${deferred.join(', ')} wait: ${deferred[0]} is a contract migration, which that build breaks on, and the others come after it.`,
    `Replace ${them} with this build one node at a time (stop: \`systemctl stop svc\`, or Ctrl-C or SIGTERM to \`svc serve\`; this build's \`svc serve\` starts before its contract migrations), then run \`${command}\` again once the last node of that build has stopped.`,
    lapseLine,
  ]
    .filter(Boolean)
    .join(' ');
}
function describeInstance(row: LiveServeInstance): string {
  const ago = Math.max(0, Math.round((row.now - row.heartbeat_at) / 1000));
  return `pid ${row.pid} on ${row.host}, svc ${row.version} (migrations up to ${row.migration_head}), roles ${row.roles}, since ${new Date(row.started_at).toISOString()}, last heartbeat ${ago} s ago`;
}
