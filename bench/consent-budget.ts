/*
 * Issue 31, item 6: 10,000 consent links of one bank under the draft's default budget (10 calls a second, 60 a
 * minute; scheduled syncs 80% of it). The simulated consent bank runs in this process and serves every call
 * over mutual TLS; the sync workers are a scheduler's (`runSyncWorkers`, the scheduler's defaults: 4 workers,
 * 2 scheduled syncs of one bank at a time), with the budget in the database as in production.
 *
 *   npm run build && node dist/bench/consent-budget.js          (BENCH_FAST=1: 1,000 links, 1-minute phases)
 *
 * Walking 10,000 consents through the bank's pages would take longer than the figures do, so BENCH_GRANTS
 * (50) real consents are made (PAR, sign-in, consent, token) and the 10,000 links share them, 200 links to
 * a grant: the bank answers each link's calls as it would its own grant's (same accounts, same
 * pages), and the appliance stores, seals and syncs each link on its own. The bank's access tokens live 10
 * minutes: every link's is marked expired, so each sync starts with a token refresh, as a sync every few hours
 * does (the bank does not rotate refresh tokens, so links sharing a grant do not spend one another's).
 *
 * Steady state (issue 43): the links start as a sync BENCH_LAG_HOURS (4) ago left them. One link's first sync
 * runs for real (complete: every list, card detail and movement) at a bank that shows each balance as it was
 * that long before, and its rows are copied to every other link (the same holder, the same accounts); so each
 * scheduled sync of the phases finds the balances that moved in one interval's time moved, and asks for those
 * accounts' movements, as a sync every 4 hours does. Its calls are printed by kind (`callName`).
 *
 * Phases, each started on a clock minute so whole budget minutes are measured:
 *  1. scheduled: every link's scheduled sync queued at once (the backlog of a full round), workers draining it
 *     for BENCH_PHASE_SECONDS (180): syncs, calls and calls per sync per minute;
 *  2. on demand, for BENCH_ON_DEMAND_SECONDS (300): the same, plus an on-demand refresh of another link about
 *     every BENCH_REFRESH_EVERY_MS (60,000, at random moments) while scheduled syncs take all their share:
 *     each refresh's latency from its intent to its end.
 * Then what one interval (`scheduler.syncIntervalMinutes`, 240) covers at the measured rate, beside the
 * arithmetic, and what the scheduler's warning, `svc doctor` and `svc_bank_budget_load` say.
 * BENCH_LINKS, BENCH_GRANTS, BENCH_PHASE_SECONDS, BENCH_ON_DEMAND_SECONDS, BENCH_REFRESH_EVERY_MS;
 * BENCH_DATABASE_URL for Postgres.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { bankCapacities, capacitySettingsOf, CapacityWarnings } from '../src/banks/budget/capacity.js';
import { CONSENT_SANDBOX_BANK_ID } from '../src/banks/institutions.js';
import { ManualClock } from '../src/clock/clock.js';
import { loadConfig } from '../src/config/load-config.js';
import { registerWithSimulatedBank } from '../src/test-mode/self-registration.js';
import { openDatabase } from '../src/db/database.js';
import { migrateUp } from '../src/db/migrations.js';
import { checkBankBudgets } from '../src/doctor/checks.js';
import { newId } from '../src/ids/ids.js';
import { claimJob, insertJobs, syncJob } from '../src/jobs/jobs.js';
import { silentLogger } from '../src/logging/logger.js';
import { buildServices } from '../src/processes/services.js';
import { queueIntent } from '../src/refresh/refresh.js';
import { SecretBox } from '../src/secrets/secret-box.js';
import { runSyncWorkers } from '../src/sync/worker-pool.js';
import { ACTIONS, consentLinkOf, REDIRECT_URI, startBank, walkConsent } from './consent-bank.js';
import { callName } from '../src/consent-bank/bank-shell.js';
import type { CustomerAccount, CustomerData } from '../src/consent-bank/customer-data.js';
import { sandboxCustomerData } from '../src/test-mode/sandbox-customer-data.js';
import { runSyncJob } from '../src/sync/engine.js';
import { freshPostgresSchema } from './lib.js';

const FAST = process.env.BENCH_FAST === '1';
const LINKS = Number(process.env.BENCH_LINKS ?? (FAST ? 1_000 : 10_000));
const GRANTS = Number(process.env.BENCH_GRANTS ?? (FAST ? 10 : 50));
const PHASE_S = Number(process.env.BENCH_PHASE_SECONDS ?? (FAST ? 60 : 180));
const ON_DEMAND_S = Number(process.env.BENCH_ON_DEMAND_SECONDS ?? (FAST ? 120 : 300));
/**
 * On average one refresh a minute, at a random moment of it: a refresh of this holder is about 12 calls, and
 * the scheduled share leaves 12 of each minute's 60, so that is what the budget keeps for people.
 */
const REFRESH_EVERY_MS = Number(process.env.BENCH_REFRESH_EVERY_MS ?? 60_000);
/** The links on-demand refreshes are asked for: kept out of the scheduled backlog, as a person's own. */
const PERSONS = 60;
const RUT = '11.111.111-1';
const BANK_CALLS = new Set(['resources', 'token', 'grant_management']);
const LAG_MS = Number(process.env.BENCH_LAG_HOURS ?? 4) * 3_600_000;

/** The sandbox's customers, each balance shown as it was `lagMs` before (the seed sync's bank). */
class LaggedBalances implements CustomerData {
  private readonly base = sandboxCustomerData();
  lagMs = 0;
  name(customer: string) {
    return this.base.name(customer);
  }
  accounts(customer: string, now: number) {
    return this.base.accounts(customer, now);
  }
  entries(customer: string, account: CustomerAccount, from: number, to: number, now: number) {
    return this.base.entries(customer, account, from, to, now);
  }
  balance(customer: string, account: CustomerAccount, now: number) {
    return this.base.balance(customer, account, now - this.lagMs);
  }
}

/** Calls by `callName`, in a stable order. */
function byName(calls: readonly { path: string }[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const call of calls) out.set(callName(call.path), (out.get(callName(call.path)) ?? 0) + 1);
  return new Map([...out].sort(([a], [b]) => a.localeCompare(b)));
}

/** The bank counts real seconds and minutes: the appliance's clock is the real one. */
class WallClock extends ManualClock {
  override now(): number {
    return Date.now();
  }
}

const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
/** Nearest rank. */
const percentile = (values: number[], p: number) =>
  values.length === 0 ? NaN : sorted(values)[Math.max(0, Math.ceil(values.length * p) - 1)]!;
const nextMinute = (at: number) => at - (at % 60_000) + 60_000;
const fmt = (n: number, digits = 1) =>
  Number.isFinite(n) ? n.toLocaleString('en-US', { maximumFractionDigits: digits }) : 'n/a';

async function run(name: string, url: string, home: string) {
  const db = openDatabase({ url });
  await migrateUp(db);
  const config = loadConfig({ home, env: {}, overrides: { databaseUrl: url, log: { level: 'silent' } } });
  const secrets = new SecretBox({ id: 'mk_bench', key: randomBytes(32) });
  const clock = new WallClock(Date.now());
  const services = buildServices(config, 'scheduler', { db, clock, logger: silentLogger, secrets });
  const data = new LaggedBalances();
  const simulated = await startBank(db, data);
  const stop = new AbortController();
  let workers: Promise<void> = Promise.resolve();
  try {
    const orgId = newId('org');
    await db.knex('organisations').insert({ id: orgId, name: 'bench', created_at: Date.now() });
    const registration = await registerWithSimulatedBank({
      db,
      secrets,
      bank: simulated.bank,
      ca: simulated.ca,
      redirectUri: REDIRECT_URI,
      clientName: 'Bank Connect', // the default widget.name
      now: Date.now(),
    });
    const opened = (await services.consentClients.forBank(db.knex, CONSENT_SANDBOX_BANK_ID, 'test'))!;
    let started = Date.now();
    const grants = [];
    for (let i = 0; i < GRANTS; i++) grants.push(await walkConsent(opened.configuration, RUT));
    const grantsMs = Date.now() - started;

    started = Date.now();
    const linkIds: string[] = [];
    for (let i = 0; i < LINKS; i++) {
      linkIds.push(
        await consentLinkOf(db, secrets, {
          orgId,
          registration,
          rut: RUT,
          tokens: grants[i % GRANTS]!,
          syncIntervalMs: config.scheduler.syncIntervalMinutes * 60_000,
        }),
      );
    }
    // Their first syncs (queued with each link, as on-demand refreshes) go: the phases queue their own.
    await db.knex('refresh_intents').delete();
    await db.knex('jobs').delete();
    // A link synced every few hours finds its 10-minute access token expired, so its sync starts with a token
    // refresh (the bank keeps refresh tokens, so the links sharing a grant do not spend one another's).
    await db.knex('link_grants').update({ access_token_expires_at: Date.now() - 1 });
    // The seed: one real complete sync at a bank showing the balances of LAG_MS ago, its rows copied to all.
    data.lagMs = LAG_MS;
    const seedFrom = simulated.bank.callLog().length;
    await db
      .knex('jobs')
      .insert(
        syncJob({ id: linkIds[0]!, org_id: orgId }, { refresh_type: 'full', interactive: false }, Date.now()),
      );
    const seedJob = (await claimJob(db, 'bench-seed', Date.now(), 600_000))!;
    const seeded = await runSyncJob(services, seedJob);
    if (seeded.status !== 'succeeded') throw new Error(`the seed sync ${seeded.status}`);
    const firstSync = byName(simulated.bank.callLog().slice(seedFrom));
    data.lagMs = 0;
    await db.knex('bank_call_budgets').update({ calls_per_sync: null });
    const seedGrant = await db.knex('link_grants').where({ link_id: linkIds[0] }).first('full_sync_at');
    const seedRows = await db.knex('accounts').where({ link_id: linkIds[0] });
    const seedMarks = new Map(
      (
        await db.knex('account_read_marks').whereIn(
          'account_id',
          seedRows.map((row) => row.id),
        )
      ).map((mark) => [mark.account_id as string, mark.movements_read_to as number]),
    );
    for (let i = 1; i < linkIds.length; i += 100) {
      const chunk = linkIds.slice(i, i + 100);
      await db.transaction(async (trx) => {
        const copies = chunk.flatMap((linkId) =>
          seedRows.map((row) => ({
            from: row.id as string,
            row: { ...row, id: newId('acc'), link_id: linkId },
          })),
        );
        await trx('accounts').insert(copies.map((copy) => copy.row));
        const marks = copies.flatMap((copy) =>
          seedMarks.has(copy.from)
            ? [{ account_id: copy.row.id, movements_read_to: seedMarks.get(copy.from) }]
            : [],
        );
        if (marks.length > 0) await trx('account_read_marks').insert(marks);
        await trx('links').whereIn('id', chunk).update({ accounts_count: seedRows.length });
        await trx('link_grants').whereIn('link_id', chunk).update({ full_sync_at: seedGrant.full_sync_at });
      });
    }
    await db.knex('jobs').delete();
    await db.knex('link_grants').update({ access_token_expires_at: Date.now() - 1 });
    const linksMs = Date.now() - started;
    const persons = linkIds.slice(0, PERSONS);
    const backlog = linkIds.slice(PERSONS);
    for (let i = 0; i < backlog.length; i += 500) {
      const chunk = backlog.slice(i, i + 500).map((id) => ({ id, org_id: orgId }));
      await db.transaction((trx) =>
        insertJobs(
          trx,
          chunk.map((link) => syncJob(link, { refresh_type: 'scheduled', interactive: false }, Date.now())),
        ),
      );
    }
    console.log(
      `\nConsent links under the default bank budget (${name}; ${LINKS.toLocaleString('en-US')} links over ` +
        `${GRANTS} real grants at the simulated consent bank, holder ${RUT}, actions ${ACTIONS.join(', ')}; ` +
        `grants made in ${fmt(grantsMs / 1000)} s, links in ${fmt(linksMs / 1000)} s)`,
    );

    workers = runSyncWorkers(services, stop.signal);
    const bankCalls = (from: number, to: number) =>
      simulated.bank.callLog().filter((c) => BANK_CALLS.has(c.kind) && c.at >= from && c.at < to);
    const scheduledDone = async (from: number, to: number) => {
      const [row] = await db
        .knex('jobs')
        .whereNull('refresh_intent_id')
        .where({ status: 'succeeded' })
        .where('updated_at', '>=', from)
        .where('updated_at', '<', to)
        .count({ n: '*' });
      return Number((row as { n: number | string }).n);
    };

    // Phase 1: the scheduled backlog alone, measured over whole budget minutes after the first one's start.
    const phase1From = nextMinute(Date.now());
    await sleep(phase1From - Date.now());
    const phase1To = phase1From + Math.max(1, Math.round(PHASE_S / 60)) * 60_000;
    await sleep(phase1To - Date.now());
    const minutes1 = (phase1To - phase1From) / 60_000;
    const syncs1 = await scheduledDone(phase1From, phase1To);
    const phase1Calls = bankCalls(phase1From, phase1To);
    const calls1 = phase1Calls.length;
    const kinds1 = byName(phase1Calls);

    // Phase 2: on-demand refreshes of the person's links while scheduled syncs keep taking their share.
    const phase2From = nextMinute(Date.now());
    await sleep(phase2From - Date.now());
    const phase2To = phase2From + Math.max(1, Math.round(ON_DEMAND_S / 60)) * 60_000;
    const intents: string[] = [];
    await sleep(REFRESH_EVERY_MS * Math.random());
    for (let i = 0; Date.now() < phase2To - 5_000; i++) {
      const link = await db
        .knex('links')
        .where({ id: persons[i % persons.length] })
        .first();
      const active = await db
        .knex('jobs')
        .where({ link_id: link.id })
        .whereIn('status', ['queued', 'running'])
        .first();
      if (!active) {
        const intent = await db.transaction((trx) => queueIntent(trx, link, 'only_last', Date.now()));
        intents.push(intent.id);
      }
      await sleep(REFRESH_EVERY_MS * (0.5 + Math.random()));
    }
    await sleep(Math.max(0, phase2To - Date.now()));
    // The last refreshes may end after the phase: wait for them (a minute at most), not counting more.
    for (let i = 0; i < 600; i++) {
      const open = await db.knex('refresh_intents').whereIn('id', intents).whereNull('completed_at');
      if (open.length === 0) break;
      await sleep(100);
    }
    const minutes2 = (phase2To - phase2From) / 60_000;
    const syncs2 = await scheduledDone(phase2From, phase2To);
    const calls2 = bankCalls(phase2From, phase2To).length;
    const intentRows = await db
      .knex('refresh_intents')
      .whereIn('id', intents)
      .select('status', 'created_at', 'completed_at');
    const latencies = intentRows
      .filter((row) => row.status === 'succeeded')
      .map((row) => Number(row.completed_at) - Number(row.created_at));
    const failed = await db.knex('jobs').where({ status: 'failed' }).count({ n: '*' });

    stop.abort();
    await workers;

    const [budgetRow] = await db.knex('bank_call_budgets').where({ bank_id: CONSENT_SANDBOX_BANK_ID });
    const callsPerSync = Number(budgetRow.calls_per_sync);
    const interval = config.scheduler.syncIntervalMinutes;
    const budget = config.banks.budget;
    const scheduledPerMinute = Math.min(
      Math.floor(budget.perMinute * budget.scheduledShare),
      Math.floor(budget.perSecond * budget.scheduledShare) * 60,
    );
    const measuredSyncsPerMinute = syncs1 / minutes1;
    const arithmeticCoverMin = (LINKS * callsPerSync) / budget.perMinute;
    const shareCoverMin = (LINKS * callsPerSync) / scheduledPerMinute;
    const measuredCoverMin = LINKS / measuredSyncsPerMinute;
    const withinInterval = (perMinute: number) => Math.min(1, (perMinute * interval) / LINKS);

    const firstTotal = [...firstSync.values()].reduce((a, b) => a + b, 0);
    const steadyPerSync = calls1 / syncs1;
    const intervalCalls = scheduledPerMinute * interval;
    // A day of 4-hourly syncs: one full pass (as costly as a first sync) and the rest steady.
    const perDay = (24 * 60) / interval;
    const dailyAverage = (firstTotal + (perDay - 1) * steadyPerSync) / perDay;
    const kindsLine = (kinds: Map<string, number>, per: number) =>
      [...kinds].map(([name, n]) => `${name} ${fmt(n / per, 2)}`).join(', ');
    const rows: [string, string][] = [
      ['links (one bank, test mode)', LINKS.toLocaleString('en-US')],
      [
        `steady state: balances as they were ${fmt(LAG_MS / 3_600_000)} h before (one interval)`,
        `A = ${seedRows.length} accounts and cards`,
      ],
      ['first sync (complete): calls by kind', `${firstTotal}: ${kindsLine(firstSync, 1)}`],
      [
        `scheduled phase: calls per sync by kind (${fmt(syncs1, 0)} syncs)`,
        `${fmt(steadyPerSync, 2)}: ${kindsLine(kinds1, syncs1)}`,
      ],
      [
        'links one bank keeps on the schedule (steady state)',
        `${fmt(scheduledPerMinute)}/min × ${interval} min = ${fmt(intervalCalls, 0)} calls ÷ ${fmt(steadyPerSync, 2)} = ${fmt(Math.floor(intervalCalls / steadyPerSync), 0)} links (target ≥ 2,300; ≤ A + 1 = ${seedRows.length + 1} calls a sync)`,
      ],
      [
        'with the daily full pass counted in',
        `(${firstTotal} + ${fmt(perDay - 1, 0)} × ${fmt(steadyPerSync, 2)}) ÷ ${fmt(perDay, 0)} = ${fmt(dailyAverage, 2)} calls a sync → ${fmt(Math.floor(intervalCalls / dailyAverage), 0)} links`,
      ],
      ['budget', `${budget.perSecond}/s, ${budget.perMinute}/min; scheduled ${scheduledPerMinute}/min`],
      ['calls one sync makes (measured average)', fmt(callsPerSync, 2)],
      [
        `scheduled phase (${minutes1} min): syncs/min, calls/min`,
        `${fmt(measuredSyncsPerMinute, 2)}, ${fmt(calls1 / minutes1)}`,
      ],
      [
        `on-demand phase (${minutes2} min, a refresh about every ${fmt(REFRESH_EVERY_MS / 1000, 0)} s): scheduled syncs/min, all calls/min`,
        `${fmt(syncs2 / minutes2, 2)}, ${fmt(calls2 / minutes2)}`,
      ],
      [
        'one round of every link: arithmetic at 60/min',
        `${fmt(LINKS)} × ${fmt(callsPerSync, 2)} ÷ ${budget.perMinute} = ${fmt(arithmeticCoverMin, 0)} min (${fmt(arithmeticCoverMin / 60)} h)`,
      ],
      [
        'one round: arithmetic at the scheduled share',
        `${fmt(LINKS)} × ${fmt(callsPerSync, 2)} ÷ ${scheduledPerMinute} = ${fmt(shareCoverMin, 0)} min (${fmt(shareCoverMin / 60)} h)`,
      ],
      [
        'one round: at the measured rate (extrapolated)',
        `${fmt(LINKS)} ÷ ${fmt(measuredSyncsPerMinute, 2)} = ${fmt(measuredCoverMin, 0)} min (${fmt(measuredCoverMin / 60)} h)`,
      ],
      [
        `links synced within their ${interval}-min interval`,
        `${fmt(100 * withinInterval(measuredSyncsPerMinute))}% measured rate; ${fmt(100 * withinInterval(scheduledPerMinute / callsPerSync))}% arithmetic`,
      ],
      [
        'on-demand refresh latency p50 / p99 (n)',
        `${fmt(percentile(latencies, 0.5), 0)} ms / ${fmt(percentile(latencies, 0.99), 0)} ms (${latencies.length} of ${intents.length} succeeded)`,
      ],
      [
        'target: on-demand p99 < one budget window (60 s)',
        percentile(latencies, 0.99) < 60_000 ? 'met' : 'NOT met',
      ],
      ['failed sync jobs', String(Number((failed[0] as { n: number | string }).n))],
    ];
    const width = Math.max(...rows.map(([label]) => label.length));
    for (const [label, value] of rows) console.log(`  ${label.padEnd(width)}  ${value}`);

    // What the operator is told: the scheduler's log line, `svc doctor`, and the metric.
    const settings = capacitySettingsOf(config);
    const capacities = await bankCapacities(db.knex, settings);
    const doctor = checkBankBudgets(capacities, interval);
    console.log(`svc doctor, bank-budgets: ${doctor.status}: ${doctor.detail}`);
    const logged: string[] = [];
    await new CapacityWarnings().check(
      db.knex,
      settings,
      pino({ level: 'info' }, { write: (line: string) => void logged.push(line) }),
      Date.now(),
    );
    for (const line of logged) console.log(`scheduler log: ${JSON.parse(line).msg}`);
    const metric = await services.metrics.registry.getSingleMetricAsString('svc_bank_budget_load');
    console.log(
      metric
        .split('\n')
        .filter((line) => line.startsWith('svc_bank_budget_load{'))
        .join('\n'),
    );
  } finally {
    stop.abort();
    await workers;
    await services.consentClients.close();
    await simulated.close();
    await db.close();
  }
}

async function main() {
  const home = mkdtempSync(join(tmpdir(), 'svc-bench-budget-'));
  const postgres = process.env.BENCH_DATABASE_URL
    ? await freshPostgresSchema(process.env.BENCH_DATABASE_URL)
    : undefined;
  try {
    if (postgres) await run('postgres', postgres.url, home);
    else await run('sqlite', `sqlite://${home}/bench.db`, home);
  } finally {
    await postgres?.drop();
    rmSync(home, { recursive: true, force: true });
  }
}

await main();
