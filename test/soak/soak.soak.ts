import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { spawnOwned } from '../helpers/processes.js';
import type { SoakReport } from '../../bench/soak.js';
import { setTimeLimit, engines } from '../helpers/harness.js';

/**
 * The load-and-soak benchmark (bench/soak.ts) run as an operator would run it, once per engine, for
 * SOAK_MINUTES (10 by default) at SOAK_RATE requests per second, with its figures held to what a long run
 * must not show: errors, undelivered events, memory that keeps growing, a WAL file that keeps growing.
 * Not part of the default suite (`*.soak.ts`); `npm run test:soak` runs it.
 */
const MINUTES = Number(process.env.SOAK_MINUTES ?? 10);
const RATE = Number(process.env.SOAK_RATE ?? 20);
const SOAK = fileURLToPath(new URL('../../bench/soak.js', import.meta.url));
/** Growth of one process's RSS from the end of the warm-up to the end of the run. */
const MEMORY_GROWTH_MB = 64;
/**
 * SQLite checkpoints the WAL back into the database every 1,000 pages (4 MB) and then reuses the file from
 * its start, so its size levels off near that; a WAL whose checkpoints never complete (a reader always on an
 * old snapshot) takes every write of the run instead (bench/soak.ts writes over 10 MB a minute).
 */
const WAL_LIMIT_MB = 16;

setTimeLimit(t, (MINUTES * 60 + 300) * 1000 * engines().length);

for (const engine of engines()) {
  t.test(`${engine}: ${MINUTES} min at ${RATE} requests/s`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-soak-report-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const reportFile = join(dir, 'report.json');
    const args = [SOAK, '--minutes', String(MINUTES), '--rate', String(RATE), '--json', reportFile];
    if (engine === 'postgres') args.push('--database-url', process.env.SVC_TEST_DATABASE_URL!);
    const child = spawnOwned(
      process.execPath,
      args,
      { stdio: ['ignore', 'pipe', 'pipe'], env: process.env },
      t,
    );
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    t.comment(output.trim());
    t.equal(code, 0, 'the soak ran to its end');
    if (code !== 0) return;
    const report = JSON.parse(readFileSync(reportFile, 'utf8')) as SoakReport;

    t.ok(report.requests >= MINUTES * 60 * RATE * 0.9, `${report.requests} requests at the steady rate`);
    t.equal(report.dropped, 0, 'the appliance kept up: no request waited behind 256 others');
    t.equal(report.errors, 0, 'no answer other than 2xx (or 429), no failed connection');
    t.equal(report.serverErrorLines, 0, 'the appliance logged no error');
    const d = report.deliveries;
    t.ok(d.events > 0, `${d.events} events emitted`);
    t.equal(d.received, d.events, 'every event reached the receiver');
    t.equal(d.pending + d.failed, 0, 'no delivery left pending or failed');
    for (const [role, m] of Object.entries(report.memory)) {
      t.ok(
        m.endMb - m.warmMb <= MEMORY_GROWTH_MB,
        `${role}: RSS ${m.warmMb} MB after the warm-up, ${m.endMb} MB at the end (max ${m.maxMb} MB)`,
      );
    }
    if (report.wal) {
      const half = Math.floor(report.wal.samplesMb.length / 2);
      const firstHalf = Math.max(...report.wal.samplesMb.slice(0, half));
      const secondHalf = Math.max(...report.wal.samplesMb.slice(half));
      t.ok(report.wal.maxMb <= WAL_LIMIT_MB, `the WAL stayed at most ${report.wal.maxMb} MB`);
      t.ok(
        secondHalf <= firstHalf + 4,
        `the WAL levelled off: ${firstHalf} MB at most in the first half, ${secondHalf} MB in the second`,
      );
    }
  });
}
