/*
 * Issue 43, item 3: one organisation's on-demand refreshes at a consent bank beside another's. The bank's call
 * budget (`banks.budget`, src/banks/budget/) is the appliance's, shared by every organisation; this measures
 * what a quiet organisation's refresh costs it when a noisy one at the same bank asks for far more than the
 * budget allows. The target: the quiet organisation's refresh p99 beside the noisy one at most 2x its p99
 * alone, on both engines.
 *
 *   npm run build && node dist/bench/bank-fairness.js        (BENCH_FAST=1: a smoke run of a few minutes)
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node dist/bench/bank-fairness.js
 *
 * What runs, as the appliance runs it: `svc serve --roles api,scheduler` (the supervisor, an API child and a
 * scheduler child with the default worker settings, `scheduler.concurrency` 4 and `perBankConcurrency` 2) on
 * an installed home. This process is the outside world: the simulated consent bank (src/consent-bank/, on
 * a database of its own, over mutual TLS on loopback), which logs when each call reached it, and the two
 * organisations' clients, which use the API over HTTP with their own keys. No dispatcher: nothing here has a
 * webhook endpoint.
 *
 * - The quiet organisation has one link (sandbox user 12.345.678-5, consent to ReadAccounts and ReadBalances:
 *   a refresh is 4 calls, the accounts list and the balances of its checking, savings and vista accounts). It
 *   asks one on-demand refresh at a time (`POST /v1/refresh_intents`), polls the intent until it ends, pauses
 *   about QUIET_PAUSE_MS and asks again. The pause is drawn between a half and one and a half of it: a fixed
 *   one would lock the requests to the clock seconds of the bank's windows (and, with `scheduler.wakeOnCommit`
 *   off, to the idle workers' 1-second poll), so every sample would wait about the same part of them. A sample is the intent's
 *   `completed_at` less the moment the request left. A sample that has not ended after SAMPLE_CAP_MS counts at
 *   the cap (the person gave up), and the next waits for it to end.
 * - The noisy organisation (11.111.111-1, all four actions: 11 calls an on-demand refresh, which reads every
 *   list) keeps a refresh of each of its NOISY_REFRESH_LINKS links in flight, asking again as soon as the last
 *   one ended; and NOISY_SCHEDULED_LINKS more links are due for their scheduled sync from the start, so the
 *   scheduler's first tick queues them all and its workers drain them at the scheduled share.
 *
 * Phases alternate, alone (only the quiet organisation works) then noisy (both), BENCH_ROUNDS of each (2),
 * each on a fresh database and a fresh `svc serve`, so both kinds see the same machine. A phase ends at its
 * share of BENCH_SAMPLES (200 a kind, across its rounds) or after BENCH_PHASE_MAX_SECONDS (600), whichever
 * comes first: a noisy phase may run out of time before its samples are in (on today's code, where the budget
 * is first come first served), and says so. The samples of each kind are pooled for the percentiles.
 *
 * Settings changed from the defaults, and why:
 * - The budget: 10 calls a second (the draft's) and BENCH_PER_MINUTE, 480, a minute (scheduled syncs 80%: 384),
 *   so both windows bind: 10 a second for 48 s spend the minute. It must be the scarce resource, not the
 *   workers: with the budget out of the way the scheduler's 4 workers at one bank (2 on scheduled syncs, 2 on
 *   refreshes) made about 5,000 calls a minute on this 2-core box (SQLite, other builds running beside), ten
 *   times 480. And it must leave the quiet organisation well under its fair share while its samples come
 *   quickly: two organisations at one bank have 240 a minute each; the quiet one asks 4 calls every L +
 *   QUIET_PAUSE_MS, about 0.05 + 3 s alone (0.6 + 3 s when idle workers found a refresh at their 1-second
 *   poll), 4 x 60 / 3.05 = 79 calls a minute (measured: 74-79): 33% of its fair share and 16% of the budget,
 *   so "alone" is not budget-bound (at the draft's 60 a minute, 79 would be more than the whole budget). 100
 *   samples at 3.05 s are 5 minutes a phase.
 * - The noisy organisation's demand: NOISY_REFRESH_LINKS (10) refreshes of 11 calls asked at every moment
 *   (unthrottled they made about 3,900 calls a minute), and NOISY_SCHEDULED_LINKS (400) scheduled syncs of 12
 *   calls (their first, complete) due, 4,800 calls, more than the scheduled share serves in the longest phase
 *   (384 a minute for 10 minutes, 3,840).
 * - `refresh.onlyLastCooldownMinutes` 0: a link may be refreshed again as soon as its refresh ended (by default
 *   5 minutes later). A tenant with 5 minutes' worth of links asks as much; here few links stand for many, and
 *   the quiet organisation's one link can be sampled every few seconds.
 * - Both organisations' rate limits (the operator's ceilings and the key's, as `svc orgs ceilings` and
 *   `svc keys limits` set them): `sync_write` by default allows 10 refresh requests a minute (5 at once) and
 *   `read` 100 polls a minute, below what either asks (the quiet one refreshes about 17 times a minute and polls
 *   its intent every 100 ms for its first seconds, the noisy one polls 10 intents a second). Both raised, so the
 *   bank's budget is the only limit measured.
 * - `sandbox.consentBank.enabled` false: the bank is this process's (its call log is the measure), so the API
 *   does not serve one of its own.
 *
 * Printed per kind: samples (and how many hit the cap), p50, p90, p99 and max of the quiet refresh; the ratio
 * noisy/alone of p50 and p99; the bank's busiest clock second and minute (its own log) against the budget;
 * the calls a minute the bank served and the noisy organisation's share of them (its syncs' `bank_calls`,
 * from the scheduler's log); and where each quiet refresh waited, by its sync's log line: for a worker
 * (`queued_ms`) and for permits (`budget_wait_ms`). BENCH_ROUNDS, BENCH_SAMPLES, BENCH_PHASE_MAX_SECONDS, BENCH_PER_SECOND,
 * BENCH_PER_MINUTE, BENCH_QUIET_PAUSE_MS, BENCH_NOISY_REFRESH_LINKS, BENCH_NOISY_SCHEDULED_LINKS.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ConsentClients } from '../src/banks/consent/client.js';
import { CONSENT_SANDBOX_BANK_ID } from '../src/banks/institutions.js';
import { systemClock } from '../src/clock/clock.js';
import type { Config } from '../src/config/defaults.js';
import { loadConfig } from '../src/config/load-config.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { migrateUp } from '../src/db/migrations.js';
import { install } from '../src/install/install.js';
import { createApiKey } from '../src/keys/keys.js';
import { createOrganisation, setOrganisationCeilings } from '../src/orgs/orgs.js';
import { loadSecretBox } from '../src/secrets/master-key-file.js';
import type { SecretBox } from '../src/secrets/secret-box.js';
import { registerWithSimulatedBank } from '../src/test-mode/self-registration.js';
import { ACTIONS, consentLinkOf, REDIRECT_URI, startBank, walkConsent } from './consent-bank.js';
import { BIN, freePort, freshPostgresSchema, waitForHealth } from './lib.js';

const FAST = process.env.BENCH_FAST === '1';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (FAST ? 1 : 2));
/** Quiet refreshes a kind, across its rounds. */
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? (FAST ? 30 : 200));
const PHASE_MAX_MS = 1000 * Number(process.env.BENCH_PHASE_MAX_SECONDS ?? (FAST ? 120 : 600));
const BUDGET = {
  perSecond: Number(process.env.BENCH_PER_SECOND ?? 10),
  perMinute: Number(process.env.BENCH_PER_MINUTE ?? 480),
};
const SCHEDULED_SHARE = 0.8; // the default `banks.budget.scheduledShare`
const QUIET_PAUSE_MS = Number(process.env.BENCH_QUIET_PAUSE_MS ?? 3_000);
const NOISY_REFRESH_LINKS = Number(process.env.BENCH_NOISY_REFRESH_LINKS ?? 10);
const NOISY_SCHEDULED_LINKS = Number(process.env.BENCH_NOISY_SCHEDULED_LINKS ?? (FAST ? 100 : 400));
/** The noisy organisation's links share a few real consents, as consent-budget.ts's do (answered each alike). */
const NOISY_GRANTS = 5;
/** How long a person waits for a refresh before giving up: the sample counts at this. */
const SAMPLE_CAP_MS = 180_000;
/** After the noisy organisation starts, before the quiet one is measured: its queue forms. */
const NOISY_SETTLE_MS = 10_000;
/** Unmeasured quiet refreshes first: the first one reads the holder's name and opens the mTLS connection. */
const WARM_UPS = 2;
const QUIET = { rut: '12.345.678-5', actions: ['ReadAccounts', 'ReadBalances'] };
const NOISY = { rut: '11.111.111-1', actions: ACTIONS };
/** Far above what either organisation asks, so the bank's budget is the only limit measured (see above). */
const RAISED = { perMinute: 60_000, burst: 1_000 };
const BANK_CALLS = new Set(['resources', 'token', 'grant_management']);

/**
 * Ctrl-C or SIGTERM: the phase stops at its next step and cleans up (its server and children, the schemas, the
 * home) before the bench exits, rather than leave a detached `svc serve` running.
 */
const interrupted = new AbortController();
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => interrupted.abort());
function unlessInterrupted(): void {
  if (interrupted.signal.aborted) throw new Error('interrupted: the server was stopped and its data removed');
}

type Kind = 'alone' | 'noisy';

interface PhaseResult {
  kind: Kind;
  /** Request to `completed_at`, ms; a capped sample counts SAMPLE_CAP_MS. */
  samples: number[];
  capped: number;
  /** The phase stopped at BENCH_PHASE_MAX_SECONDS before its samples were in. */
  outOfTime: boolean;
  measuredMs: number;
  busiestSecond: number;
  busiestMinute: number;
  /** Budgeted calls the bank logged in the measured window, a minute. */
  bankPerMinute: number;
  /** The noisy organisation's calls a minute by its syncs' own count (the scheduler's log), by kind. */
  noisyOnDemandPerMinute: number;
  noisyScheduledPerMinute: number;
  /** Calls a finished sync made, by its own count: quiet refreshes, noisy refreshes, noisy scheduled syncs. */
  quietCallsPerRefresh: number;
  noisyCallsPerRefresh: number;
  noisyCallsPerScheduled: number;
  /** Syncs deferred for the budget in the window: the quiet organisation's, and all (the scheduler's log). */
  quietDeferred: number;
  deferred: number;
  /** Where each quiet refresh spent its time, by its sync's log line: waiting for a worker, for permits. */
  quietQueuedMs: number[];
  quietBudgetWaitMs: number[];
}

interface Tenant {
  orgId: string;
  key: string;
}

interface Answer {
  status: number;
  body: Record<string, unknown>;
  retryAfterMs: number | null;
}

/** An organisation and its secret key, both with raised rate limits (see the header). */
async function tenant(db: Database, config: Readonly<Config>, name: string): Promise<Tenant> {
  return db.transaction(async (trx) => {
    const now = Date.now();
    const org = await createOrganisation(trx, name, 'bench', now);
    const limits = { read: RAISED, sync_write: RAISED };
    await setOrganisationCeilings(trx, {
      orgId: org.id,
      ceilings: limits,
      reset: false,
      actor: 'bench',
      now,
    });
    const issued = await createApiKey(trx, {
      brand: config.brand,
      orgId: org.id,
      mode: 'test',
      type: 'secret',
      actor: 'bench',
      now,
      rateLimits: limits,
    });
    return { orgId: org.id, key: issued.secret };
  });
}

/** `count` consent links of `orgId` at the simulated bank, sharing `grants` real consents of `rut`. */
async function consentLinks(
  db: Database,
  secrets: SecretBox,
  clients: ConsentClients,
  registration: { id: string; client_id: string },
  orgId: string,
  who: { rut: string; actions: readonly string[] },
  count: number,
  grants: number,
): Promise<string[]> {
  const opened = (await clients.forBank(db.knex, CONSENT_SANDBOX_BANK_ID, 'test'))!;
  const tokens = [];
  for (let i = 0; i < Math.min(grants, count); i++)
    tokens.push(await walkConsent(opened.configuration, who.rut, who.actions));
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    unlessInterrupted();
    ids.push(
      await consentLinkOf(db, secrets, {
        orgId,
        registration,
        rut: who.rut,
        tokens: tokens[i % tokens.length]!,
        syncIntervalMs: 240 * 60_000,
      }),
    );
  }
  return ids;
}

/** Starts `svc serve --roles api,scheduler` on the home; resolves once the API answers. */
async function serve(home: string): Promise<{ url: string; child: ChildProcess; stderr: () => string }> {
  const port = await freePort();
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env))
    if (value !== undefined && !name.startsWith('SVC_')) env[name] = value;
  const child = spawn(process.execPath, [BIN, 'serve', '--roles', 'api,scheduler', '--port', String(port)], {
    env: {
      ...env,
      SVC_HOME: home,
      SVC_METRICS_PORT: '0',
      SVC_LOG_LEVEL: 'info',
      SVC_LOG_FILE: join(home, 'svc.log'),
      SVC_BANKS_BUDGET_PER_SECOND: String(BUDGET.perSecond),
      SVC_BANKS_BUDGET_PER_MINUTE: String(BUDGET.perMinute),
      SVC_REFRESH_ONLY_LAST_COOLDOWN_MINUTES: '0',
      SVC_SANDBOX_CONSENT_BANK_ENABLED: 'false',
      NODE_OPTIONS: '',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
    // Its own process group, so that a server that will not stop can be killed with its children.
    detached: true,
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-4_000);
  });
  const url = `http://127.0.0.1:${port}`;
  await Promise.race([
    waitForHealth(url),
    new Promise((_, reject) =>
      child.once('exit', (code) =>
        reject(new Error(`svc serve exited (${code}) before answering: ${stderr}`)),
      ),
    ),
  ]);
  return { url, child, stderr: () => stderr };
}

/** SIGTERM (a graceful drain), then after 45 s SIGKILL to the server's process group. */
async function stopServer(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // gone already
    }
  }, 45_000);
  await exited;
  clearTimeout(timer);
}

/** The most calls in one clock window of `ms` (a second, a minute), as the bank counts them. */
function busiest(calls: readonly { at: number }[], ms: number): number {
  const counts = new Map<number, number>();
  for (const call of calls)
    counts.set(Math.floor(call.at / ms), (counts.get(Math.floor(call.at / ms)) ?? 0) + 1);
  return Math.max(0, ...counts.values());
}

/** The scheduler's log lines about syncs: when, which link, and the calls a finished one made. */
function syncLines(
  home: string,
): { at: number; msg: string; link: string; calls: number; queuedMs: number; budgetWaitMs: number }[] {
  const file = join(home, 'svc.log');
  if (!existsSync(file)) return [];
  const out = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line.includes('"msg":"sync ')) continue;
    try {
      const entry = JSON.parse(line) as {
        time: string;
        msg: string;
        link?: string;
        bank_calls?: number;
        queued_ms?: number;
        budget_wait_ms?: number;
      };
      out.push({
        at: Date.parse(entry.time),
        msg: entry.msg,
        link: entry.link ?? '',
        calls: entry.bank_calls ?? 0,
        queuedMs: entry.queued_ms ?? 0,
        budgetWaitMs: entry.budget_wait_ms ?? 0,
      });
    } catch {
      // a line cut short at the stop
    }
  }
  return out;
}

async function phase(kind: Kind, want: number): Promise<PhaseResult> {
  const home = mkdtempSync(join(tmpdir(), 'svc-bench-fairness-'));
  const base = process.env.BENCH_DATABASE_URL;
  const appSchema = base ? await freshPostgresSchema(base) : undefined;
  const bankSchema = base ? await freshPostgresSchema(base) : undefined;
  const stop = new AbortController();
  const noise: Promise<void>[] = [];
  let server: Awaited<ReturnType<typeof serve>> | undefined;
  let db: Database | undefined;
  let bankDb: Database | undefined;
  let bank: Awaited<ReturnType<typeof startBank>> | undefined;
  let clients: ConsentClients | undefined;
  try {
    await install({
      home,
      env: { SVC_HOME: home },
      databaseUrl: appSchema?.url,
      clock: systemClock,
      actor: 'bench',
    });
    const config = loadConfig({ home, env: {} });
    db = openDatabase({ url: config.databaseUrl });
    // The home's master key, which the server's processes open the registration and the grants with.
    const secrets = loadSecretBox(config);
    clients = new ConsentClients(secrets);
    // The bank keeps its own books, as a real one does: a database of its own.
    bankDb = openDatabase({ url: bankSchema?.url ?? `sqlite://${home}/bank.db` });
    await migrateUp(bankDb);
    bank = await startBank(bankDb);
    const registration = await registerWithSimulatedBank({
      db,
      secrets,
      bank: bank.bank,
      ca: bank.ca,
      redirectUri: REDIRECT_URI,
      clientName: config.widget.name,
      now: Date.now(),
    });
    const quiet = await tenant(db, config, 'quiet');
    const noisy = await tenant(db, config, 'noisy');
    const [quietLink] = await consentLinks(db, secrets, clients, registration, quiet.orgId, QUIET, 1, 1);
    const noisyLinks = await consentLinks(
      db,
      secrets,
      clients,
      registration,
      noisy.orgId,
      NOISY,
      NOISY_REFRESH_LINKS + NOISY_SCHEDULED_LINKS,
      NOISY_GRANTS,
    );
    const refreshed = noisyLinks.slice(0, NOISY_REFRESH_LINKS);
    const scheduled = noisyLinks.slice(NOISY_REFRESH_LINKS);
    // Each link's first sync was queued with it: the phase asks for its own. No link is due, except the noisy
    // organisation's scheduled ones in a noisy phase (the tick at the scheduler's start queues them all).
    await db.knex('refresh_intents').delete();
    await db.knex('jobs').delete();
    await db.knex('links').update({ next_sync_at: Date.now() + 86_400_000 });
    if (kind === 'noisy')
      await db
        .knex('links')
        .whereIn('id', scheduled)
        .update({ next_sync_at: Date.now() - 1 });

    unlessInterrupted();
    server = await serve(home);
    const url = server.url;
    const call = async (key: string, method: string, path: string, body?: unknown): Promise<Answer> => {
      const response = await fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(30_000),
      });
      const text = await response.text();
      const retryAfter = response.headers.get('retry-after');
      return {
        status: response.status,
        body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
        retryAfterMs: retryAfter === null ? null : Number(retryAfter) * 1000,
      };
    };

    /** One quiet refresh: request to `completed_at`, or the cap. */
    const quietRefresh = async (): Promise<{ ms: number; capped: boolean }> => {
      const sent = Date.now();
      const asked = await call(quiet.key, 'POST', '/v1/refresh_intents', { link_id: quietLink });
      if (asked.status !== 200)
        throw new Error(
          `the quiet organisation's refresh was refused: ${asked.status} ${JSON.stringify(asked.body)}`,
        );
      const id = asked.body.id as string;
      for (;;) {
        unlessInterrupted();
        // Every 100 ms at first, so an alone sample's poll adds little to the customer's wait; `completed_at`
        // is the measure anyway, so later polls may be sparser.
        await sleep(Date.now() - sent < 5_000 ? 100 : 1_000);
        const seen = await call(quiet.key, 'GET', `/v1/refresh_intents/${id}`);
        if (seen.body.status === 'succeeded')
          return { ms: Date.parse(seen.body.completed_at as string) - sent, capped: false };
        if (seen.body.status === 'failed')
          throw new Error(`the quiet organisation's refresh failed: ${String(seen.body.error_code)}`);
        if (Date.now() - sent < SAMPLE_CAP_MS) continue;
        // Given up on: the next may only be asked once this one ends (409 refresh_in_progress before).
        for (const until = Date.now() + SAMPLE_CAP_MS; Date.now() < until; await sleep(1_000)) {
          unlessInterrupted();
          const late = await call(quiet.key, 'GET', `/v1/refresh_intents/${id}`);
          if (late.body.status === 'succeeded' || late.body.status === 'failed')
            return { ms: SAMPLE_CAP_MS, capped: true };
        }
        throw new Error(
          `the quiet organisation's refresh ${id} had not ended ${(2 * SAMPLE_CAP_MS) / 1000} s after it was asked: aborting`,
        );
      }
    };

    /** The noisy organisation's refreshes of one link, one after another until the phase stops. */
    const keepRefreshing = async (linkId: string) => {
      while (!stop.signal.aborted) {
        try {
          const asked = await call(noisy.key, 'POST', '/v1/refresh_intents', { link_id: linkId });
          if (asked.status !== 200) {
            await sleep(asked.retryAfterMs ?? 500, undefined, { signal: stop.signal });
            continue;
          }
          for (;;) {
            await sleep(1_000, undefined, { signal: stop.signal });
            const seen = await call(noisy.key, 'GET', `/v1/refresh_intents/${asked.body.id as string}`);
            if (seen.body.status === 'succeeded' || seen.body.status === 'failed') break;
          }
        } catch {
          // the phase stopped (an aborted sleep), or an answer lost while the server stops
          if (!stop.signal.aborted) await sleep(500);
        }
      }
    };

    for (let i = 0; i < WARM_UPS; i++) await quietRefresh();
    if (kind === 'noisy') {
      for (const link of refreshed) noise.push(keepRefreshing(link));
      await sleep(NOISY_SETTLE_MS);
    }

    const from = Date.now();
    const samples: number[] = [];
    let capped = 0;
    while (samples.length < want && Date.now() - from < PHASE_MAX_MS) {
      unlessInterrupted();
      const sample = await quietRefresh();
      samples.push(sample.ms);
      if (sample.capped) capped += 1;
      await sleep(QUIET_PAUSE_MS * (0.5 + Math.random()));
    }
    const to = Date.now();
    stop.abort();
    await Promise.all(noise);

    const log = bank.bank.callLog();
    if (log.length > 0 && log[0]!.at > from)
      console.warn(
        `  (the bank's call log keeps its latest calls only: it lost the first of this phase's window)`,
      );
    const calls = log.filter((c) => BANK_CALLS.has(c.kind) && c.at >= from && c.at < to);
    // Rates over the whole clock minutes of the window, the budget's own: a window of 2.2 minutes may hold
    // parts of three, each with its own minute's calls.
    const wholeFrom = Math.ceil(from / 60_000) * 60_000;
    const wholeTo = Math.floor(to / 60_000) * 60_000;
    // No whole minute (a short phase): no rate (n/a), rather than one that parts of two minutes inflate.
    const minutes = wholeTo > wholeFrom ? (wholeTo - wholeFrom) / 60_000 : NaN;
    const lines = syncLines(home);
    const inRate = lines.filter((line) => line.at >= wholeFrom && line.at < wholeTo);
    const inWindow = lines.filter((line) => line.at >= from && line.at < to);
    const syncsOf = (links: readonly string[], among = inWindow) => {
      const set = new Set(links);
      return among.filter((line) => line.msg === 'sync succeeded' && set.has(line.link));
    };
    const callsOf = (links: readonly string[], among = inWindow) =>
      syncsOf(links, among).reduce((sum, line) => sum + line.calls, 0);
    const perSync = (links: readonly string[]) => callsOf(links) / syncsOf(links).length;
    return {
      kind,
      samples,
      capped,
      outOfTime: samples.length < want,
      measuredMs: to - from,
      busiestSecond: busiest(calls, 1_000),
      busiestMinute: busiest(calls, 60_000),
      bankPerMinute: calls.filter((c) => c.at >= wholeFrom && c.at < wholeTo).length / minutes,
      noisyOnDemandPerMinute: callsOf(refreshed, inRate) / minutes,
      noisyScheduledPerMinute: callsOf(scheduled, inRate) / minutes,
      quietCallsPerRefresh: perSync([quietLink!]),
      noisyCallsPerRefresh: perSync(refreshed),
      noisyCallsPerScheduled: perSync(scheduled),
      quietDeferred: inWindow.filter(
        (line) => line.msg.startsWith('sync deferred') && line.link === quietLink,
      ).length,
      deferred: inWindow.filter((line) => line.msg.startsWith('sync deferred')).length,
      quietQueuedMs: syncsOf([quietLink!]).map((line) => line.queuedMs),
      quietBudgetWaitMs: syncsOf([quietLink!]).map((line) => line.budgetWaitMs),
    };
  } finally {
    stop.abort();
    await Promise.all(noise);
    if (server) await stopServer(server.child);
    await clients?.close();
    await bank?.close();
    await bankDb?.close();
    await db?.close();
    await appSchema?.drop();
    await bankSchema?.drop();
    rmSync(home, { recursive: true, force: true });
  }
}

/** Nearest rank. */
function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(p * sorted.length) - 1)]!;
}

const ms = (value: number) =>
  Number.isFinite(value) ? `${Math.round(value).toLocaleString('en-US')} ms` : 'n/a';
const fmt = (value: number, digits = 1) =>
  Number.isFinite(value) ? value.toLocaleString('en-US', { maximumFractionDigits: digits }) : 'n/a';
const medianOf = (values: number[]) => percentile(values.filter(Number.isFinite), 0.5);

function phaseLine(result: PhaseResult, round: number): string {
  return (
    `  ${result.kind} ${round + 1}: ${result.samples.length} samples in ${fmt(result.measuredMs / 1000, 0)} s` +
    `${result.outOfTime ? ' (out of time)' : ''}, ${result.capped} at the cap; p50 ${ms(percentile(result.samples, 0.5))}, ` +
    `p99 ${ms(percentile(result.samples, 0.99))}; bank ${fmt(result.bankPerMinute)} calls/min ` +
    `(busiest second ${result.busiestSecond}, minute ${result.busiestMinute}); noisy ${fmt(result.noisyOnDemandPerMinute)} ` +
    `on demand + ${fmt(result.noisyScheduledPerMinute)} scheduled calls/min; syncs deferred ${result.quietDeferred} quiet, ${result.deferred} in all; ` +
    `quiet refresh waited for a worker p50 ${ms(percentile(result.quietQueuedMs, 0.5))} p99 ${ms(percentile(result.quietQueuedMs, 0.99))}, ` +
    `for permits p50 ${ms(percentile(result.quietBudgetWaitMs, 0.5))} p99 ${ms(percentile(result.quietBudgetWaitMs, 0.99))}`
  );
}

async function main(): Promise<void> {
  const engine = process.env.BENCH_DATABASE_URL ? 'PostgreSQL' : 'SQLite';
  const scheduledPerMinute = Math.floor(BUDGET.perMinute * SCHEDULED_SHARE);
  console.log(
    `Bank fairness on ${engine}: ${ROUNDS} alone and ${ROUNDS} noisy phases, interleaved; ${SAMPLES} quiet refreshes ` +
      `a kind (at most ${PHASE_MAX_MS / 1000} s a phase); budget ${BUDGET.perSecond}/s, ${BUDGET.perMinute}/min ` +
      `(scheduled ${scheduledPerMinute}/min); noisy: ${NOISY_REFRESH_LINKS} refreshes always asked, ` +
      `${NOISY_SCHEDULED_LINKS} scheduled syncs due; quiet pause ${QUIET_PAUSE_MS} ms on average`,
  );
  const started = Date.now();
  const results: Record<Kind, PhaseResult[]> = { alone: [], noisy: [] };
  const perPhase = Math.ceil(SAMPLES / ROUNDS);
  for (let round = 0; round < ROUNDS; round++) {
    for (const kind of ['alone', 'noisy'] as const) {
      const result = await phase(kind, perPhase);
      results[kind].push(result);
      console.log(phaseLine(result, round));
    }
  }

  const rows: [string, string][] = [];
  const figures = {} as Record<Kind, { p50: number; p99: number }>;
  for (const kind of ['alone', 'noisy'] as const) {
    const phases = results[kind];
    const samples = phases.flatMap((p) => p.samples);
    const capped = phases.reduce((sum, p) => sum + p.capped, 0);
    const outOfTime = phases.filter((p) => p.outOfTime).length;
    figures[kind] = { p50: percentile(samples, 0.5), p99: percentile(samples, 0.99) };
    rows.push([
      `quiet refresh, ${kind}: samples, p50 / p90 / p99 / max`,
      `${samples.length}${capped > 0 ? ` (${capped} at the ${SAMPLE_CAP_MS / 1000} s cap)` : ''}` +
        `${outOfTime > 0 ? ` (${outOfTime} phase(s) out of time)` : ''}: ${ms(percentile(samples, 0.5))} / ` +
        `${ms(percentile(samples, 0.9))} / ${ms(percentile(samples, 0.99))} / ${ms(Math.max(...samples))}`,
    ]);
    rows.push([
      `bank, ${kind}: busiest second / minute (budget ${BUDGET.perSecond} / ${BUDGET.perMinute}); calls/min`,
      `${Math.max(...phases.map((p) => p.busiestSecond))} / ${Math.max(...phases.map((p) => p.busiestMinute))}; ` +
        `${fmt(medianOf(phases.map((p) => p.bankPerMinute)))}`,
    ]);
    if (kind === 'noisy')
      rows.push([
        'noisy organisation: calls/min on demand + scheduled (calls a sync)',
        `${fmt(medianOf(phases.map((p) => p.noisyOnDemandPerMinute)))} (${fmt(medianOf(phases.map((p) => p.noisyCallsPerRefresh)), 2)}) + ` +
          `${fmt(medianOf(phases.map((p) => p.noisyScheduledPerMinute)))} (${fmt(medianOf(phases.map((p) => p.noisyCallsPerScheduled)), 2)})`,
      ]);
    rows.push([
      `quiet organisation, ${kind}: calls a refresh; its syncs deferred (of all deferred)`,
      `${fmt(medianOf(phases.map((p) => p.quietCallsPerRefresh)), 2)}; ${phases.reduce((sum, p) => sum + p.quietDeferred, 0)} ` +
        `(${phases.reduce((sum, p) => sum + p.deferred, 0)})`,
    ]);
  }
  const p50Ratio = figures.noisy.p50 / figures.alone.p50;
  const p99Ratio = figures.noisy.p99 / figures.alone.p99;
  rows.push(['noisy / alone: p50, p99', `${fmt(p50Ratio, 2)}x, ${fmt(p99Ratio, 2)}x`]);
  const width = Math.max(...rows.map(([label]) => label.length));
  console.log(`\nBank fairness on ${engine} (${fmt((Date.now() - started) / 60_000)} min)`);
  for (const [label, value] of rows) console.log(`  ${label.padEnd(width)}  ${value}`);
  console.log(
    `target: the quiet organisation's refresh p99 beside the noisy one at most 2x its p99 alone: ` +
      `${p99Ratio <= 2 ? 'met' : 'NOT met'} (${fmt(p99Ratio, 2)}x)`,
  );
}

await main().catch((error: Error) => {
  console.error(interrupted.signal.aborted ? error.message : error);
  process.exitCode = 1;
});
