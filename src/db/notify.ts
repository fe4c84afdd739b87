import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Knex } from 'knex';
import pg from 'pg';
import { engineOf, sqlitePath } from './database.js';
import { DATABASE_RETRY_CAP_MS } from './errors.js';

/**
 * Commit wake-ups, so a worker in another process hears of new work at once instead of at its next poll.
 * Polling stays the fallback: a wake-up is only a hint, and a missed one costs one poll interval.
 *
 * - Postgres: `NOTIFY` inside the writing transaction, which Postgres delivers to `LISTEN`ers when (and only
 *   if) it commits.
 * - SQLite: nothing to send; every commit appends to the `-wal` file, and the watcher sees that file change
 *   (inotify on Linux, kqueue/FSEvents elsewhere). Every process of the appliance shares one host (DESIGN
 *   §1), so the file system does carry the news. The watcher wakes on any commit, not only relevant ones;
 *   the worker's answer to a wake-up is one indexed read.
 */
export async function notifyOnCommit(trx: Knex, channel: string): Promise<void> {
  if ((trx.client as { dialect?: string }).dialect === 'postgresql') {
    await trx.raw('select pg_notify(?, ?)', [channel, '']);
  }
}

export interface CommitWatcher {
  close(): Promise<void>;
}

export interface WatchOptions {
  url: string;
  channel: string;
  onCommit: () => void;
  onError: (error: Error) => void;
}

export function watchCommits(options: WatchOptions): CommitWatcher {
  return engineOf(options.url) === 'postgres' ? listenPostgres(options) : watchSqlite(options);
}

function watchSqlite({ url, onCommit, onError }: WatchOptions): CommitWatcher {
  const file = sqlitePath(url);
  const wal = `${basename(file)}-wal`;
  let watcher: FSWatcher | null = null;
  try {
    // The directory, not the file: SQLite deletes the WAL when the last connection closes and recreates it.
    watcher = watch(dirname(file), { persistent: false }, (_event, name) => {
      if (name === null || name === wal) onCommit();
    });
    watcher.on('error', (error) => onError(error));
  } catch (error) {
    onError(error as Error);
  }
  return {
    async close() {
      watcher?.close();
    },
  };
}

function listenPostgres({ url, channel, onCommit, onError }: WatchOptions): CommitWatcher {
  const parsed = new URL(url);
  parsed.searchParams.delete('schema');
  let client: pg.Client | null = null;
  let closed = false;
  let retryMs = 500;
  let timer: NodeJS.Timeout | null = null;

  const connect = async () => {
    if (closed) return;
    const next = new pg.Client({ connectionString: parsed.toString(), connectionTimeoutMillis: 5000 });
    next.on('notification', () => onCommit());
    next.on('error', (error) => {
      onError(error);
      reconnect(next);
    });
    next.on('end', () => reconnect(next));
    try {
      await next.connect();
      await next.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      if (closed) {
        await next.end().catch(() => undefined);
        return;
      }
      client = next;
      retryMs = 500;
      // Work may have been committed while we were not listening.
      onCommit();
    } catch (error) {
      onError(error as Error);
      reconnect(next);
    }
  };
  const reconnect = (failed: pg.Client) => {
    if (closed || timer || (client !== null && client !== failed)) return;
    client = null;
    failed.removeAllListeners('end');
    failed.end().catch(() => undefined);
    timer = setTimeout(() => {
      timer = null;
      void connect();
    }, retryMs);
    timer.unref();
    retryMs = Math.min(retryMs * 2, DATABASE_RETRY_CAP_MS);
  };
  void connect();
  return {
    async close() {
      closed = true;
      if (timer) clearTimeout(timer);
      const current = client;
      client = null;
      if (current) {
        current.removeAllListeners('end');
        await current.end().catch(() => undefined);
      }
    },
  };
}
