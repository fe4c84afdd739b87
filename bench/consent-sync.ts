/*
 * Issue 30's figures: a consent sync (accounts, balances, cards and about 1,100 movements read from the
 * simulated consent bank's API over mutual TLS on loopback) beside a credential sync of the same data (the
 * credential sandbox, in process, for the same person at `bancochile`), on SQLite and (with
 * BENCH_DATABASE_URL) Postgres. Full syncs (90 days) of one link each, interleaved A B A B in one process
 * after warm-ups, so a shared machine's load falls on both alike; then one more consent sync, not timed,
 * that counts the calls it makes to the bank and the movements each brought; then steady-state scheduled
 * consent syncs (a balance call an account, movements only where a balance moved), timed and counted.
 *
 * The bank's call budget (banks.budget, 60 calls a minute by default) is set out of the way here: these are
 * the syncs' own times. With it in the way, back-to-back syncs of one link measured the budget's waits
 * (issue 43: a median of 3.0 s and a p90 of 57 s); what the budget allows is bench/consent-budget.ts's
 * figure, and the calls each sync makes are printed beside the times.
 *
 *   npm run build && node dist/bench/consent-sync.js
 *
 * The holder is the sandbox's busy holder, 21.212.121-5 (BUSY_HOLDERS in src/banks/sandbox/profile.ts).
 * BENCH_ROUNDS (15) timed rounds after BENCH_WARMUPS (2).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Knex } from 'knex';
import { ConsentClients, type ConsentClient } from '../src/banks/consent/client.js';
import { defaultConnectors } from '../src/banks/default-connectors.js';
import { CONSENT_SANDBOX_BANK_ID } from '../src/banks/institutions.js';
import { systemClock } from '../src/clock/clock.js';
import { loadConfig } from '../src/config/load-config.js';
import { type ConsentBank } from '../src/consent-bank/consent-bank.js';
import { registerWithSimulatedBank } from '../src/test-mode/self-registration.js';
import { makeTestCa } from '../src/consent-bank/test-ca.js';
import { CONSENT_BANK_DATA_BANK } from '../src/test-mode/sandbox-customer-data.js';
import { openDatabase, type Database } from '../src/db/database.js';
import { migrateUp } from '../src/db/migrations.js';
import { newId } from '../src/ids/ids.js';
import { claimJob, syncJob } from '../src/jobs/jobs.js';
import { silentLogger } from '../src/logging/logger.js';
import { SecretBox } from '../src/secrets/secret-box.js';
import { runSyncJob, type SyncServices } from '../src/sync/engine.js';
import { consentLinkOf, REDIRECT_URI, startBank, walkConsent } from './consent-bank.js';
import { freshPostgresSchema } from './lib.js';

const RUT = '21.212.121-5';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);
const WARMUPS = Number(process.env.BENCH_WARMUPS ?? 2);

/** One call the consent connector made: what it asked, and how many records the answer's `data` held. */
interface Call {
  what: string;
  records: number | null;
  ms: number;
}

/** The process's consent clients, whose fetch can be told to note every call (only in the untimed sync). */
class CountingClients extends ConsentClients {
  calls: Call[] | null = null;

  override async forBank(db: Knex, bankId: string, mode: 'live' | 'test'): Promise<ConsentClient | null> {
    const opened = await super.forBank(db, bankId, mode);
    const calls = this.calls;
    if (!opened || !calls) return opened;
    return {
      ...opened,
      fetch: async (url, init) => {
        const started = performance.now();
        const response = await opened.fetch(url, init);
        const body = (await response
          .clone()
          .json()
          .catch(() => null)) as { data?: unknown } | null;
        calls.push({
          what: new URL(url).pathname
            .replace(/.*\/open-banking\//, '')
            .replace(/\/accounts\/[^/]+/, '/accounts/{id}'),
          records: Array.isArray(body?.data) ? body.data.length : null,
          ms: performance.now() - started,
        });
        return response;
      },
    };
  }
}

async function seedOrg(db: Database, now: number): Promise<string> {
  const orgId = newId('org');
  await db.knex('organisations').insert({ id: orgId, name: 'bench', created_at: now });
  return orgId;
}

/** A consent link for RUT at the simulated bank, through the real PAR, sign-in, consent and token. */
async function consentLink(
  db: Database,
  secrets: SecretBox,
  clients: ConsentClients,
  bank: ConsentBank,
  ca: Awaited<ReturnType<typeof makeTestCa>>,
  orgId: string,
): Promise<string> {
  const registration = await registerWithSimulatedBank({
    db,
    secrets,
    bank,
    ca,
    redirectUri: REDIRECT_URI,
    clientName: 'Bank Connect', // the default widget.name
    now: Date.now(),
  });
  const opened = (await clients.forBank(db.knex, CONSENT_SANDBOX_BANK_ID, 'test'))!;
  const tokens = await walkConsent(opened.configuration, RUT);
  const linkId = await consentLinkOf(db, secrets, {
    orgId,
    registration,
    rut: RUT,
    tokens,
    syncIntervalMs: 3_600_000,
  });
  // createConsentLink queues the first full sync; the rounds queue their own.
  await db.knex('jobs').where({ link_id: linkId }).delete();
  return linkId;
}

/** A credential link at the sandbox for the same person and bank code as the consent bank's data. */
async function credentialLink(db: Database, secrets: SecretBox, orgId: string, now: number): Promise<string> {
  const id = newId('link');
  await db.knex('links').insert({
    id,
    org_id: orgId,
    mode: 'test',
    bank_id: CONSENT_BANK_DATA_BANK,
    holder_type: 'individual',
    status: 'active',
    credentials_encrypted: secrets.seal(
      JSON.stringify({ rut: RUT.replace(/\./g, ''), password: 'sandbox', rutEmpresa: null }),
      id,
    ),
    created_at: now,
    updated_at: now,
  });
  return id;
}

/** One sync of a link (full by default), queued, claimed and run as a worker does; the run alone is timed (ms). */
async function timedSync(
  services: SyncServices,
  orgId: string,
  linkId: string,
  refreshType: 'full' | 'scheduled' = 'full',
): Promise<number> {
  const now = Date.now();
  await services.db
    .knex('jobs')
    .insert(syncJob({ id: linkId, org_id: orgId }, { refresh_type: refreshType, interactive: false }, now));
  const job = (await claimJob(services.db, 'bench', now, 600_000))!;
  if (job.link_id !== linkId) throw new Error('claimed another link');
  const started = performance.now();
  const outcome = await runSyncJob(services, job);
  const ms = performance.now() - started;
  if (outcome.status !== 'succeeded') {
    const row = await services.db.knex('jobs').where({ id: job.id }).first();
    throw new Error(`sync of ${linkId} ${outcome.status}: ${row?.last_error}`);
  }
  return ms;
}

async function counts(db: Database, linkId: string) {
  const [accounts] = await db.knex('accounts').where({ link_id: linkId }).count({ n: '*' });
  const [movements] = await db.knex('movements').where({ link_id: linkId }).count({ n: '*' });
  return { accounts: Number(accounts!.n), movements: Number(movements!.n) };
}

const countBy = (calls: Call[]) => {
  const out = new Map<string, number>();
  for (const call of calls) out.set(call.what, (out.get(call.what) ?? 0) + 1);
  return out;
};
const sorted = (values: number[]) => [...values].sort((a, b) => a - b);
const median = (values: number[]) => sorted(values)[Math.floor(values.length / 2)]!;
/** The nearest-rank 90th percentile: of 15 rounds, the 14th. */
const p90 = (values: number[]) => sorted(values)[Math.ceil(values.length * 0.9) - 1]!;
const ms = (value: number) => `${value.toFixed(0).padStart(6)} ms`;

async function run(name: string, url: string, home: string) {
  const db = openDatabase({ url });
  await migrateUp(db);
  // The bank's budget out of the way (see above): the sync's own time, not the budget's waits.
  const config = loadConfig({
    home,
    env: {},
    overrides: {
      databaseUrl: url,
      log: { level: 'silent' },
      banks: { budget: { perSecond: 100_000, perMinute: 1_000_000 } },
    },
  });
  const secrets = new SecretBox({ id: 'mk_bench', key: randomBytes(32) });
  const clients = new CountingClients(secrets);
  const services: SyncServices = {
    db,
    clock: systemClock,
    secrets,
    logger: silentLogger,
    config,
    connectors: defaultConnectors(config),
    consentClients: clients,
  };
  const simulated = await startBank(db);
  try {
    const orgId = await seedOrg(db, Date.now());
    const consent = await consentLink(db, secrets, clients, simulated.bank, simulated.ca, orgId);
    const credential = await credentialLink(db, secrets, orgId, Date.now());

    const firsts = { consent: 0, credential: 0 };
    const times = { consent: [] as number[], credential: [] as number[] };
    const ratios: number[] = [];
    for (let round = 0; round < WARMUPS + ROUNDS; round++) {
      const a = await timedSync(services, orgId, consent);
      const b = await timedSync(services, orgId, credential);
      if (round === 0) Object.assign(firsts, { consent: a, credential: b });
      if (round < WARMUPS) continue;
      times.consent.push(a);
      times.credential.push(b);
      ratios.push(a / b);
    }

    clients.calls = [];
    const counted = await timedSync(services, orgId, consent);
    const calls = clients.calls;
    clients.calls = null;

    // Steady state: scheduled syncs within a day of that full one read balances only (nothing moved in the
    // seconds between them, so no movements either): the calls and time of each.
    const steady: number[] = [];
    let steadyCalls: Call[] = [];
    for (let round = 0; round < WARMUPS + ROUNDS; round++) {
      clients.calls = [];
      const took = await timedSync(services, orgId, consent, 'scheduled');
      steadyCalls = clients.calls;
      clients.calls = null;
      if (round >= WARMUPS) steady.push(took);
    }

    const stored = { consent: await counts(db, consent), credential: await counts(db, credential) };
    console.log(
      `\nConsent sync beside credential sync (${name}, ${RUT}: ${stored.consent.accounts} accounts, ` +
        `${stored.consent.movements} movements stored by consent, ${stored.credential.movements} by credential; ` +
        `full 90-day syncs, ${ROUNDS} interleaved rounds after ${WARMUPS} warm-ups)`,
    );
    // The first consent sync also compiles the answer schemas (a few hundred ms, once per process).
    console.log(`                                  median        p90   first sync (writes every row)`);
    console.log(
      `  consent (mTLS, simulated bank)  ${ms(median(times.consent))} ${ms(p90(times.consent))}   ${ms(firsts.consent)}`,
    );
    console.log(
      `  credential (sandbox, in process)${ms(median(times.credential))} ${ms(p90(times.credential))}   ${ms(firsts.credential)}`,
    );
    console.log(
      `  consent / credential            ${median(ratios).toFixed(2).padStart(9)}x (median of the rounds' ratios; ` +
        `p90 ${p90(ratios).toFixed(2)}x)`,
    );
    const total = calls.reduce((sum, call) => sum + call.ms, 0);
    console.log(
      `Bank calls of one full consent sync (${calls.length} calls, ${total.toFixed(0)} ms waiting on the bank of a ${counted.toFixed(0)} ms sync; ` +
        `at the default budget of 60 calls a minute, ${calls.length} calls are ${(calls.length / 60).toFixed(2)} min of one bank's budget)`,
    );
    // The bank runs in this process, so waiting on it is mostly its own work (it generates each page's
    // 90 days anew); what is left is the appliance's: TLS, schema checks, mapping, matching, writing.
    console.log(`  the appliance's own part (sync minus waiting)  ${ms(counted - total)}`);
    const kinds = new Map<string, Call[]>();
    for (const call of calls) kinds.set(call.what, [...(kinds.get(call.what) ?? []), call]);
    for (const [what, group] of kinds) {
      const records = group.map((call) => call.records).filter((n): n is number => n !== null);
      const spent = group.reduce((sum, call) => sum + call.ms, 0);
      console.log(
        `  ${what.padEnd(44)} ${String(group.length).padStart(3)} calls ${spent.toFixed(0).padStart(6)} ms` +
          (what.endsWith('/transactions') ? `  records per call: ${records.join(', ')}` : ''),
      );
    }
    console.log(
      `Steady-state scheduled consent syncs (${ROUNDS} after ${WARMUPS} warm-ups): median ${ms(median(steady))}, ` +
        `p90 ${ms(p90(steady))}; ${steadyCalls.length} calls each: ` +
        [...countBy(steadyCalls)].map(([what, n]) => `${what} ${n}`).join(', '),
    );
  } finally {
    await clients.close();
    await simulated.close();
    await db.close();
  }
}

async function main() {
  const home = mkdtempSync(join(tmpdir(), 'svc-bench-consent-'));
  const postgres = process.env.BENCH_DATABASE_URL
    ? await freshPostgresSchema(process.env.BENCH_DATABASE_URL)
    : undefined;
  try {
    await run('sqlite', `sqlite://${home}/bench.db`, home);
    if (postgres) await run('postgres', postgres.url, home);
  } finally {
    await postgres?.drop();
    rmSync(home, { recursive: true, force: true });
  }
}

await main();
