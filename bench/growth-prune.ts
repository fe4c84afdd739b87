/*
 * bench/growth.ts's housekeeping, in a process of its own as production runs it (the scheduler, which runs
 * housekeeping, is its own process beside the API's): forked with the instance's home, it opens the
 * database from that home's config and, for each message `{ offsetMs, maxRowsPerPass? }`, runs one
 * `runHousekeeping` pass with its clock at now + offsetMs and answers `{ ms, removed, pruned }` (the
 * pass's own log record says what it removed, so nothing is counted beside it). `maxRowsPerPass` overrides
 * the retention setting of that name (an operator's setting), used only to drain a year's backlog faster.
 */
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { loadConfig } from '../src/config/load-config.js';
import { openDatabase } from '../src/db/database.js';
import { runHousekeeping } from '../src/scheduler/housekeeping.js';
import { loadSecretBox } from '../src/secrets/master-key-file.js';

export interface PassRequest {
  offsetMs: number;
  maxRowsPerPass?: number;
}

export interface PassReport {
  ms: number;
  removed: number;
  pruned: Record<string, number>;
}

const home = process.argv[2]!;
const config = loadConfig({ home, env: { SVC_HOME: home } });
const db = openDatabase({ url: config.databaseUrl });
const secrets = loadSecretBox(config);

let last: Record<string, number> | null = null;
const sink = new Writable({
  write(chunk: Buffer, _encoding, done) {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (line.trim() === '') continue;
      const record = JSON.parse(line) as { msg?: string; retention_pruned?: Record<string, number> };
      if (record.msg === 'housekeeping done') last = record.retention_pruned ?? {};
    }
    done();
  },
});
const logger = pino({ level: 'info' }, sink);

process.on('message', (message: PassRequest | { exit: true }) => {
  void (async () => {
    if ('exit' in message) {
      await db.close();
      process.exit(0);
    }
    const passConfig =
      message.maxRowsPerPass === undefined
        ? config
        : { ...config, retention: { ...config.retention, maxRowsPerPass: message.maxRowsPerPass } };
    last = null;
    const started = performance.now();
    await runHousekeeping({
      db,
      clock: { now: () => Date.now() + message.offsetMs },
      config: passConfig,
      logger,
      secrets,
    });
    const ms = performance.now() - started;
    // pino writes asynchronously: wait for the pass's record.
    for (let i = 0; i < 100 && last === null; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    const pruned: Record<string, number> = (last as Record<string, number> | null) ?? {};
    const removed = Object.values(pruned).reduce((sum: number, n: number) => sum + n, 0);
    process.send!({ ms, removed, pruned } satisfies PassReport);
  })();
});
process.send!({ ready: true });
