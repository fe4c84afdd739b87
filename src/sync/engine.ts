import type { Knex } from 'knex';
import type { Clock } from '../clock/clock.js';
import type { Config } from '../config/defaults.js';
import type { Database } from '../db/database.js';
import type { Logger } from '../logging/logger.js';
import type { SecretBox } from '../secrets/secret-box.js';
import { newId } from '../ids/ids.js';
import {
  accountCreated,
  accountRemoved,
  linkExpired,
  linkRefreshed,
  refreshIntentFailed,
  refreshIntentRequiresMfa,
  refreshIntentSucceeded,
} from '../events/payloads.js';
import { publishEvent } from '../webhooks/fan-out.js';
import {
  ConnectorError,
  type BankAccount,
  type BankMovement,
  type BankSession,
  type Connector,
  type DateWindow,
  type LoginCredentials,
  type MfaChallenge,
} from '../banks/connector.js';
import type { ConnectorResolver } from '../banks/resolver.js';
import type { ConsentClients } from '../banks/consent/client.js';
import { createConsentConnector } from '../banks/consent/consent-connector.js';
import {
  findGrantRow,
  lastFullSyncOf,
  lastHolderReadOf,
  openGrant,
  saveGrantTokens,
  type LinkGrantRow,
} from '../links/consent/grants.js';
import {
  completeJob,
  deferJob,
  failJob,
  LeaseLostError,
  parkJobForMfa,
  type JobRow,
  type SyncPayload,
} from '../jobs/jobs.js';
import { SecretError } from '../secrets/secret-box.js';
import { openCredentials, UNREADABLE_CREDENTIALS } from '../links/links.js';
import {
  markLinkAwaitingMfa,
  markLinkQueued,
  markLinkSynced,
  markLinkSyncFailed,
  markLinkSyncing,
} from '../links/link-states.js';
import { findLink, type LinkRow } from '../links/store.js';
import {
  awaitIntentMfa,
  awaitNextMfaCode,
  completeIntent,
  failIntent,
  startIntent,
} from '../refresh/intent-states.js';
import { findIntent, type IntentRow } from '../refresh/store.js';
import {
  type AccountRow,
  accountsOfLink,
  backfillCoverage,
  createAccount,
  extendBackfillCoverage,
  recountAccount,
  refreshAccount,
  removeAccount,
} from '../accounts/store.js';
import { applyPlan, movementCounts, movementsToMatch } from '../movements/store.js';
import { bankEndingConsents, recordSyncOutcome } from '../banks/health.js';
import { limitsOf } from '../banks/budget/budget.js';
import { BudgetWait, SyncPermits } from '../banks/budget/permits.js';
import { BudgetGate, withBankCalls } from '../banks/budget/bank-calls.js';
import { bankInterval, pauseBank, recordSyncCalls } from '../banks/budget/store.js';
import { reconcile } from './reconcile.js';

const DAY = 86_400_000;

/** How far back each kind of sync reads movements. */
export const SYNC_WINDOW_DAYS: Record<SyncPayload['refresh_type'], number> = {
  scheduled: 14,
  only_last: 14,
  historical: 60,
  full: 90,
  backfill: 90,
};

/** Backfill reads statements for what is older than this; the movements API covers the rest. */
export const BACKFILL_AFTER_DAYS = 90;

/** Stored rows this far before the window are loaded too, so a retroactive booking still matches. */
const MATCH_SLACK_DAYS = 7;

/**
 * A consent link's scheduled syncs read only balances (one call an account, and movements only where a
 * figure moved) for a day after a sync that read everything; then the next one reads every list, every
 * card's details and every account's movements again (docs/open-finance.md, "Calls per sync"): what a
 * balance cannot show (a movement booked without moving it, an account added to the consent) waits a day at
 * most.
 */
export const FULL_PASS_EVERY_MS = DAY;
/**
 * An account whose balance moved is read from where its last read ended, less this overlap: a bank books a
 * movement on the day it happened a day or so late (a card purchase settles in one or two working days), and
 * the filters take whole days. What lands earlier still is found by the daily full pass, which reads the
 * whole 14-day window.
 */
export const INCREMENTAL_OVERLAP_MS = 2 * DAY;

export interface SyncServices {
  db: Database;
  clock: Clock;
  secrets: SecretBox;
  logger: Logger;
  config: Readonly<Config>;
  connectors: ConnectorResolver;
  /** The consent banks' clients: a link with a grant syncs through its bank's API with them. */
  consentClients: ConsentClients;
}

/**
 * How many times a job the bank rate-limited (429/529) waits for its `Retry-After` and tries again before
 * it fails: the draft's limits are per second (529, 0 to 5 s) and per minute (429, to the next minute), so
 * one wait usually clears them, and three tries bound what a bank that keeps refusing costs.
 */
export const RATE_LIMIT_TRIES = 3;

interface Fetched {
  /** Null when nothing had to be fetched (a backfill of a period already covered). */
  session: BankSession | null;
  /** Each account's rows and the posted_at window they cover (null: nothing fetched for it). */
  accounts: { account: BankAccount; movements: BankMovement[]; window: DateWindow | null }[];
  /** Every list and every account's movements were read (not a balance-only sync, not a backfill). */
  fullPass: boolean;
  /** The bank was asked for the holder's name and answered (a consent link's first sync or daily full pass). */
  holderRead?: boolean;
}

/**
 * The bank refused the code but its challenge still holds and the person has tries left
 * (`refresh.mfaAttempts`): the intent waits for another code, with the same token and `expires_at`.
 */
class MfaRetry extends Error {
  constructor() {
    super('the bank refused the MFA code; another may be tried');
  }
}

/** The bank waits for an MFA code: the intent waits too, and the sync resumes when the code arrives. */
class MfaWait extends Error {
  constructor(readonly challenge: MfaChallenge) {
    super('the bank asked for an MFA code');
  }
}

export type SyncOutcome =
  | { status: 'succeeded'; newMovements: number; accounts: number }
  | { status: 'waiting_mfa' }
  | { status: 'deferred'; until: number }
  | { status: 'failed'; errorCode: string }
  | { status: 'skipped'; reason: string };

/**
 * Runs one claimed sync job: talks to the bank outside any transaction, then writes everything the sync
 * found (accounts, movements, counters, link state, intent, events, the job's completion) in one short
 * transaction, or, on failure, the failure's consequences in one transaction. Nothing is half-written.
 */
export async function runSyncJob(services: SyncServices, job: JobRow): Promise<SyncOutcome> {
  const payload = JSON.parse(job.payload ?? '{}') as SyncPayload;
  const link = job.link_id === null ? undefined : await findLink(services.db.knex, job.link_id);
  if (!link) {
    await services.db.transaction((trx) => failJob(trx, job, 'link deleted', services.clock.now()));
    return { status: 'skipped', reason: 'link deleted' };
  }
  if (link.status === 'expired' && payload.refresh_type === 'scheduled') {
    await services.db.transaction((trx) => failJob(trx, job, 'link expired', services.clock.now()));
    return { status: 'skipped', reason: 'link expired' };
  }
  const intent: IntentRow | null = job.refresh_intent_id
    ? ((await findIntent(services.db.knex, job.refresh_intent_id)) ?? null)
    : null;

  const startedAt = services.clock.now();
  await services.db.transaction(async (trx) => {
    await markLinkSyncing(trx, link.id, startedAt);
    if (intent) await startIntent(trx, intent, startedAt);
  });

  // An on-demand refresh (it has an intent) may use the whole of the bank's budget; a scheduled sync its share.
  // Either within the link's organisation's share among the organisations calling the bank (org-shares.ts).
  const permits = new SyncPermits(
    {
      db: services.db,
      clock: services.clock,
      limits: limitsOf(services.config.banks.budget, services.config.banks.budgets, link.bank_id),
      scheduledShare: services.config.banks.budget.scheduledShare,
      arrivalMarginMs: services.config.banks.budget.arrivalMarginMs,
    },
    { bankId: link.bank_id, mode: link.mode },
    link.org_id,
    job.refresh_intent_id === null ? 'scheduled' : 'on_demand',
  );
  // Every call of the sync goes through the gate: the connector's `permit()` prepays the call it is about to
  // make, and a call it does not announce (the `client_credentials` token before a Grant Management query)
  // takes its own (banks/budget/bank-calls.ts).
  const gate = new BudgetGate(services, { bankId: link.bank_id, mode: link.mode }, permits);
  let fetched: Fetched;
  try {
    fetched = await withBankCalls(gate, () => fetchFromBank(services, link, payload, intent, gate));
  } catch (error) {
    const now = services.clock.now();
    if (error instanceof BudgetWait) {
      await services.db.transaction(async (trx) => {
        if (!(await deferJob(trx, job, error.until, error.jobError, now, { refundAttempt: true })))
          throw new LeaseLostError(`job ${job.id} lost its lease`);
        await markLinkQueued(trx, link.id, now);
      });
      services.logger.info(
        { link: link.id, job: job.id, bank: link.bank_id, until: new Date(error.until).toISOString() },
        "sync deferred: it waits for the bank's budget",
      );
      return { status: 'deferred', until: error.until };
    }
    if (error instanceof MfaWait && intent) {
      await services.db.transaction((trx) =>
        recordMfaWait(trx, services, job, link, intent, error.challenge, now),
      );
      services.logger.info({ link: link.id, job: job.id, intent: intent.id }, 'sync waits for MFA');
      return { status: 'waiting_mfa' };
    }
    if (error instanceof MfaRetry && intent) {
      await services.db.transaction((trx) => recordMfaRetry(trx, job, link, intent, now));
      services.logger.info(
        { link: link.id, job: job.id, intent: intent.id },
        'sync waits for another MFA code',
      );
      return { status: 'waiting_mfa' };
    }
    if (error instanceof SecretError) {
      // The sealed credentials or MFA material do not open (tampered with, or sealed with a master key this
      // process does not hold): no bank call can help, so the sync fails here, and says why, instead of
      // retrying forever. It does not count towards expiry: restoring the row or the key fixes it.
      services.logger.error(
        { link: link.id, job: job.id, err: error.message },
        'sync failed: stored secrets do not open',
      );
      await services.db.transaction((trx) =>
        recordFailure(trx, services, job, link, { code: UNREADABLE_CREDENTIALS }, now),
      );
      return { status: 'failed', errorCode: UNREADABLE_CREDENTIALS };
    }
    if (!(error instanceof ConnectorError)) throw error;
    // The bank said when to call again: no process calls it before then (a 429 is per client, a 529 the bank's
    // whole load), not only this job.
    if (error.retryAt !== undefined && permits.calls > 0)
      await pauseBank(
        services.db,
        { bankId: link.bank_id, mode: link.mode },
        error.retryAt,
        error.reason ?? error.code,
        now,
      );
    if (error.retryAt !== undefined && job.attempts < RATE_LIMIT_TRIES) {
      const until = Math.max(error.retryAt, now);
      await services.db.transaction(async (trx) => {
        if (!(await deferJob(trx, job, until, jobErrorOf(error), now)))
          throw new LeaseLostError(`job ${job.id} lost its lease`);
        await markLinkQueued(trx, link.id, now);
      });
      services.logger.info(
        { link: link.id, job: job.id, error: error.code, until: new Date(until).toISOString() },
        'sync deferred: the bank asked to be called later',
      );
      return { status: 'deferred', until };
    }
    await services.db.transaction((trx) => recordFailure(trx, services, job, link, error, now));
    services.logger.info({ link: link.id, job: job.id, error: error.code }, 'sync failed');
    return { status: 'failed', errorCode: error.code };
  }

  const now = services.clock.now();
  const result = await services.db.transaction((trx) =>
    recordSuccess(trx, services, job, link, intent, fetched, payload, now),
  );
  if (permits.calls > 0)
    await recordSyncCalls(services.db, { bankId: link.bank_id, mode: link.mode }, permits.calls, now);
  services.logger.info(
    {
      link: link.id,
      job: job.id,
      new_movements: result.newMovements,
      accounts: result.accounts,
      bank_calls: permits.calls,
      ...(permits.late > 0 ? { late_permits: permits.late } : {}),
      // Where a slow refresh spent its time: waiting for a worker, then for the bank's budget.
      queued_ms: Math.max(0, startedAt - job.run_at),
      ...(permits.waitedMs > 0 ? { budget_wait_ms: permits.waitedMs } : {}),
    },
    'sync succeeded',
  );
  return { status: 'succeeded', ...result };
}

/** A backfill of `months` reaches that many 30-day months before the last 90 days. */
function backfillStart(intent: IntentRow | null, now: number): number {
  return now - BACKFILL_AFTER_DAYS * DAY - (intent?.backfill_months ?? 12) * 30 * DAY;
}

/** How far back each kind of sync reads; a backfill reads statements older than the movements API reaches. */
function windowFor(
  payload: SyncPayload,
  link: LinkRow,
  intent: IntentRow | null,
  now: number,
): DateWindow | null {
  if (payload.refresh_type !== 'backfill')
    return { from: now - SYNC_WINDOW_DAYS[payload.refresh_type] * DAY, to: now + 1 };
  const to = now - BACKFILL_AFTER_DAYS * DAY;
  const from = backfillStart(intent, now);
  const covered = link.backfill_covered_from ?? null;
  if (intent?.force || covered === null) return { from, to };
  // Covered already: nothing to download. Asked for more: download only what extends the coverage.
  return from >= covered ? null : { from, to: covered };
}

/** A connector and what it logs in with: a password, or a consent link's grant. */
interface Login<C extends LoginCredentials> {
  connector: Connector<C>;
  credentials: C;
}

/**
 * A link with a grant (links/consent/) syncs through its bank's API: the consent connector for the
 * registration the grant was issued to, with the grant opened, and refreshed tokens stored the moment the
 * bank returns them (their own short transaction), whatever becomes of the sync. Any other link logs in
 * with its sealed password, through the bank's configured connector.
 */
async function openLogin(
  services: SyncServices,
  link: LinkRow,
  gate: BudgetGate,
): Promise<Login<LoginCredentials>> {
  const grantRow = await findGrantRow(services.db.knex, link.id);
  if (grantRow) return openConsentLogin(services, link, grantRow, gate);
  const connector = services.connectors(link.bank_id, link.mode);
  if (!connector)
    throw new ConnectorError(
      'bank_unavailable',
      `No connector is configured for ${link.bank_id} in ${link.mode} mode.`,
    );
  return {
    connector: connector as Connector<LoginCredentials>,
    credentials: openCredentials(link, services.secrets),
  };
}

async function openConsentLogin(
  services: SyncServices,
  link: LinkRow,
  grantRow: LinkGrantRow,
  gate: BudgetGate,
): Promise<Login<LoginCredentials>> {
  const grant = openGrant(grantRow, services.secrets);
  let client;
  try {
    client = await services.consentClients.forBank(services.db.knex, link.bank_id, link.mode);
  } catch {
    const reason = `the bank's discovery document could not be read over mutual TLS`;
    throw new ConnectorError('bank_unavailable', reason, { reason });
  }
  if (!client) {
    const reason = `the appliance is not registered with ${link.bank_id} in ${link.mode} mode (svc banks register)`;
    throw new ConnectorError('bank_unavailable', reason, { reason });
  }
  if (client.registration.id !== grant.consentClientId) {
    const reason =
      'the grant was issued to an earlier registration with the bank, which was replaced: the user must renew the consent';
    throw new ConnectorError('rejected_credentials', reason, { reason });
  }
  // While the bank ends consents in bulk, each link is first checked with one Grant Management query.
  const checkGrantFirst = await bankEndingConsents(
    services.db.reader,
    { bankId: link.bank_id, mode: link.mode },
    services.clock.now(),
  );
  if (checkGrantFirst)
    services.logger.warn(
      { link: link.id, bank: link.bank_id },
      'the bank is ending consents in bulk: the grant is checked with Grant Management first',
    );
  const connector = createConsentConnector({
    client,
    answers: services.consentClients.answers(client.profile),
    checkGrantFirst,
    permit: () => gate.prepay(),
    saveTokens: (tokens) =>
      services.db.transaction((trx) =>
        saveGrantTokens(
          trx,
          services.secrets,
          link.id,
          tokens,
          services.clock.now(),
          grantRow.grant_id_sealed,
        ),
      ),
  });
  return { connector: connector as unknown as Connector<LoginCredentials>, credentials: grant };
}

async function fetchFromBank(
  services: SyncServices,
  link: LinkRow,
  payload: SyncPayload,
  intent: IntentRow | null,
  gate: BudgetGate,
): Promise<Fetched> {
  const now = services.clock.now();
  const window = windowFor(payload, link, intent, now);
  if (!window) return { session: null, accounts: [], fullPass: false };
  const { connector, credentials } = await openLogin(services, link, gate);
  const request = {
    bankId: link.bank_id,
    holderType: link.holder_type,
    credentials,
    now,
    interactive: payload.interactive,
    history: { attempts: link.sync_attempts, successes: link.sync_successes },
  };
  let session: BankSession;
  if (intent?.mfa_challenge_encrypted && intent.mfa_code_encrypted) {
    // Resuming after MFA: the challenge carries the bank's half-open login; no second login.
    const challenge = JSON.parse(
      services.secrets.open(intent.mfa_challenge_encrypted, intent.id),
    ) as MfaChallenge;
    try {
      session = await connector.submitMfa(
        request,
        challenge,
        services.secrets.open(intent.mfa_code_encrypted, intent.id),
      );
    } catch (error) {
      const wrong = (intent.mfa_attempts ?? 0) + 1;
      if (
        error instanceof ConnectorError &&
        error.code === 'mfa_invalid' &&
        wrong < services.config.refresh.mfaAttempts &&
        challenge.expiresAt >= now
      )
        throw new MfaRetry();
      throw error;
    }
  } else {
    const login = await connector.login(request);
    if (login.kind === 'mfa') {
      if (payload.interactive && intent) throw new MfaWait(login.challenge);
      throw new ConnectorError(
        'mfa_required',
        'The bank asked for a second factor, which a background sync cannot provide.',
      );
    }
    session = login.session;
  }
  const fullAt = connector.readBalance ? await lastFullSyncOf(services.db.reader, link.id) : null;
  if (fullAt !== null && balanceOnlyAllowed(payload, intent, fullAt, now) && connector.readBalance) {
    const light = await readBalancesOnly(services, connector, session, link, fullAt, window, now);
    if (light) return { session, accounts: light, fullPass: false };
    // An account the bank no longer has: the lists are read again at once, in this sync.
  }
  const holderRead =
    payload.refresh_type !== 'backfill' && (await readHolder(services, connector, session, link, now));
  const accounts = await connector.listAccounts(session, now);
  const out: Fetched['accounts'] = [];
  const coverage = await backfillCoverage(services.db.reader, link.id);
  for (const account of accounts) {
    if (payload.refresh_type !== 'backfill') {
      out.push({ account, window, movements: await connector.listMovements(session, account, window, now) });
      continue;
    }
    // An account backfilled before needs only what extends its coverage; a new one, the whole period.
    const covered = intent?.force ? null : (coverage.get(account.ref) ?? null);
    const own =
      covered === null
        ? { from: window.from, to: now - BACKFILL_AFTER_DAYS * DAY }
        : window.from < covered
          ? { from: window.from, to: covered }
          : null;
    if (!own) {
      out.push({ account, window: null, movements: [] });
      continue;
    }
    try {
      out.push({
        account,
        window: own,
        movements: connector.statements ? await connector.statements(session, account, own, now) : [],
      });
    } catch (error) {
      if (!(error instanceof ConnectorError && error.code === 'unsupported')) throw error;
      out.push({ account, window: null, movements: [] }); // this account has no statements
    }
  }
  return { session, accounts: out, fullPass: payload.refresh_type !== 'backfill', holderRead };
}

/**
 * A consent link's holder, named on the session before the lists are read (its accounts carry the name too): the
 * bank's word on a sync that reads the lists when the grant's last read of it is none or a day old (the first
 * sync, the daily full pass; an on-demand refresh within the day does not ask again), otherwise the name the
 * link has. True when the bank answered, named or not. A name the bank could not give now leaves the link's.
 */
async function readHolder(
  services: SyncServices,
  connector: Connector<LoginCredentials>,
  session: BankSession,
  link: LinkRow,
  now: number,
): Promise<boolean> {
  if (!connector.readHolderName) return false;
  session.holderName = link.holder_name ?? '';
  const readAt = await lastHolderReadOf(services.db.reader, link.id);
  if (readAt !== null && now - readAt < FULL_PASS_EVERY_MS) return false;
  const read = await connector.readHolderName(session, now);
  if (read.kind === 'failed') {
    services.logger.warn(
      { link: link.id, bank: link.bank_id, reason: read.reason },
      "the holder's name could not be read at the bank; the link keeps its own",
    );
    return false;
  }
  if (read.kind === 'named') session.holderName = read.name;
  return true;
}

/**
 * Whether a sync may read balances only: a scheduled sync (a first sync, an on-demand refresh and a backfill
 * read everything) of a link whose last full pass is less than a day old.
 */
function balanceOnlyAllowed(
  payload: SyncPayload,
  intent: IntentRow | null,
  fullAt: number,
  now: number,
): boolean {
  if (payload.refresh_type !== 'scheduled' || payload.interactive || intent) return false;
  return now - fullAt < FULL_PASS_EVERY_MS;
}

/** The figures a sync compares: null and a number differ, and Postgres may hand a bigint as a string. */
function sameBalance(row: AccountRow, balance: BankAccount['balance']): boolean {
  const same = (stored: number | string | null | undefined, read: number | null) =>
    (stored ?? null) === null ? read === null : read !== null && Number(stored) === read;
  return (
    same(row.balance_available, balance.available) &&
    same(row.balance_current, balance.current) &&
    same(row.balance_limit, balance.limit)
  );
}

/**
 * A steady-state scheduled sync of a consent link: the accounts and cards it has, as the last full pass left
 * them (the lists and card details are not read again), each with one call for its balance or limits, and
 * movements only for those whose figures moved, from where their last read ended (less the overlap). Null
 * when the bank says an account is gone: the caller reads the lists at once. An account the last full pass
 * could not read (Brazil's paused resources) is left as it is until the next one.
 */
async function readBalancesOnly(
  services: SyncServices,
  connector: Connector<LoginCredentials>,
  session: BankSession,
  link: LinkRow,
  fullAt: number,
  window: DateWindow,
  now: number,
): Promise<Fetched['accounts'] | null> {
  const rows = (await accountsOfLink(services.db.reader, link.id)).filter((row) => row.status === 'active');
  const out: Fetched['accounts'] = [];
  const paused: string[] = [];
  for (const row of rows) {
    if (Number(row.refreshed_at) < fullAt) {
      paused.push(row.bank_account_ref);
      continue;
    }
    const known: BankAccount = {
      ref: row.bank_account_ref,
      name: row.name,
      type: row.type,
      currency: row.currency,
      last4: row.last_4 ?? '',
      holderName: row.holder_name ?? '',
      balance: {
        available: row.balance_available == null ? null : Number(row.balance_available),
        current: row.balance_current == null ? null : Number(row.balance_current),
        limit: row.balance_limit == null ? null : Number(row.balance_limit),
      },
    };
    const read = await connector.readBalance!(session, known, now);
    if (read.kind === 'gone') return null;
    const account = read.kind === 'read' ? { ...known, balance: read.balance } : known;
    const readTo = row.movements_read_to == null ? null : Number(row.movements_read_to);
    if (read.kind === 'read' && readTo !== null && sameBalance(row, read.balance)) {
      out.push({ account, window: null, movements: [] });
      continue;
    }
    const own = {
      from: readTo === null ? window.from : Math.max(window.from, readTo - INCREMENTAL_OVERLAP_MS),
      to: window.to,
    };
    out.push({ account, window: own, movements: await connector.listMovements(session, account, own, now) });
  }
  session.unavailableRefs = paused;
  return out;
}

/**
 * The bank asked for a code during an on-demand refresh: the job parks (`waiting_mfa`), the intent goes to
 * `requires_mfa` with a `ri_…_sec_…` token the widget can be opened with, and `refresh_intent.requires_mfa`
 * carries it to the customer. The challenge is kept sealed so any worker can resume.
 */
async function recordMfaWait(
  trx: Knex,
  services: SyncServices,
  job: JobRow,
  link: LinkRow,
  intent: IntentRow,
  challenge: MfaChallenge,
  now: number,
): Promise<void> {
  if (!(await parkJobForMfa(trx, job, now))) throw new LeaseLostError(`job ${job.id} lost its lease`);
  const token = await awaitIntentMfa(trx, services.secrets, intent.id, challenge, now);
  await markLinkAwaitingMfa(trx, link.id, now);
  await publishEvent(trx, {
    orgId: link.org_id,
    mode: link.mode,
    type: 'refresh_intent.requires_mfa',
    linkId: link.id,
    data: refreshIntentRequiresMfa(
      { id: intent.id, link_id: link.id },
      { widgetToken: token, expiresAt: challenge.expiresAt },
    ),
    now,
  });
}

/** A wrong code with tries left: the job parks again and the intent waits for the next code. */
async function recordMfaRetry(
  trx: Knex,
  job: JobRow,
  link: LinkRow,
  intent: IntentRow,
  now: number,
): Promise<void> {
  if (!(await parkJobForMfa(trx, job, now))) throw new LeaseLostError(`job ${job.id} lost its lease`);
  await awaitNextMfaCode(trx, intent, now);
  await markLinkAwaitingMfa(trx, link.id, now);
}

async function recordSuccess(
  trx: Knex,
  services: SyncServices,
  job: JobRow,
  link: LinkRow,
  intent: IntentRow | null,
  fetched: Fetched,
  payload: SyncPayload,
  now: number,
): Promise<{ newMovements: number; accounts: number }> {
  if (!(await completeJob(trx, job, now))) throw new LeaseLostError(`job ${job.id} lost its lease`);
  const owner = { orgId: link.org_id, mode: link.mode, linkId: link.id };
  const existing = await accountsOfLink(trx, link.id);
  const byRef = new Map(existing.map((row) => [row.bank_account_ref, row]));
  const seen = new Set<string>();
  let newMovements = 0;
  let accountsUpdated = 0;

  for (const { account, movements, window } of fetched.accounts) {
    let row:
      | Pick<AccountRow, 'id' | 'bank_account_ref' | 'status' | 'name' | 'type' | 'currency' | 'last_4'>
      | undefined = byRef.get(account.ref);
    const balances = {
      name: account.name,
      last_4: account.last4,
      holder_name: account.holderName,
      balance_available: account.balance.available,
      balance_current: account.balance.current,
      balance_limit: account.balance.limit,
      refreshed_at: now,
      updated_at: now,
      // Where the next incremental window of this account starts (less the overlap).
      ...(window && payload.refresh_type !== 'backfill' ? { movements_read_to: now } : {}),
    };
    if (!row) {
      row = await createAccount(trx, {
        org_id: link.org_id,
        mode: link.mode,
        link_id: link.id,
        bank_account_ref: account.ref,
        type: account.type,
        currency: account.currency,
        created_at: now,
        ...balances,
      });
      await publishEvent(trx, {
        ...owner,
        type: 'account.created',
        data: accountCreated({ ...row, link_id: link.id }),
        now,
      });
    } else {
      await refreshAccount(trx, row.id, balances);
    }
    seen.add(row.id);
    if (window) newMovements += await writeMovements(trx, link, row.id, movements, window, now);
    if (window && payload.refresh_type === 'backfill') await extendBackfillCoverage(trx, row.id, window.from);
    accountsUpdated += 1;
  }

  // Accounts the bank did not list this time are removed; a sync that fetched nothing lists none. One the
  // bank says exists but cannot be read now (a block, a co-holder's pending consent) stays as it was.
  const paused = new Set(fetched.session?.unavailableRefs ?? []);
  for (const row of fetched.session ? existing : []) {
    if (seen.has(row.id) || row.status === 'removed' || paused.has(row.bank_account_ref)) continue;
    await removeAccount(trx, row.id, now);
    await publishEvent(trx, {
      ...owner,
      type: 'account.removed',
      data: accountRemoved({ id: row.id, link_id: link.id }, now),
      now,
    });
  }

  const nextSyncAt = now + (await syncIntervalMs(trx, services, link));
  await markLinkSynced(
    trx,
    link,
    {
      // '' keeps the link's own: a consent link's is named only when its bank was asked (`readHolder`).
      holderName: fetched.session?.holderName || null,
      accountsCount: fetched.session ? seen.size : null,
      newMovements,
      nextSyncAt,
      backfillFrom:
        payload.refresh_type === 'backfill' && fetched.session ? backfillStart(intent, now) : null,
      fullPass: fetched.fullPass,
      holderRead: fetched.holderRead ?? false,
    },
    now,
  );
  await recordSyncOutcome(trx, { bankId: link.bank_id, mode: link.mode, errorCode: null, now });

  if (job.refresh_intent_id) {
    await completeIntent(trx, job.refresh_intent_id, { accountsUpdated, newMovements }, now);
    await publishEvent(trx, {
      ...owner,
      type: 'refresh_intent.succeeded',
      data: refreshIntentSucceeded({
        id: job.refresh_intent_id,
        link_id: link.id,
        completed_at: now,
        accounts_updated: accountsUpdated,
        new_movements_count: newMovements,
      }),
      now,
    });
  }
  await publishEvent(trx, {
    ...owner,
    type: 'link.refreshed',
    // The accounts the bank listed this time (none when nothing was fetched), not the link's counter.
    data: linkRefreshed(link, {
      syncedAt: now,
      nextSyncAt,
      accountsCount: seen.size,
      newMovements,
    }),
    now,
  });
  return { newMovements, accounts: seen.size };
}

/**
 * The link's interval: the configured one, or its bank's stretched one when the bank's links need more calls
 * than its budget allows (scheduler/stretch.ts), so `next_sync_at` says when the sync will really come.
 */
async function syncIntervalMs(trx: Knex, services: SyncServices, link: LinkRow): Promise<number> {
  const configured = services.config.scheduler.syncIntervalMinutes;
  const stretched = await bankInterval(trx, { bankId: link.bank_id, mode: link.mode });
  return Math.max(configured, stretched ?? 0) * 60_000;
}

/** Reconciles one account with what the bank sent, writes the plan and refreshes the account's counters. */
async function writeMovements(
  trx: Knex,
  link: LinkRow,
  accountId: string,
  movements: BankMovement[],
  window: DateWindow,
  now: number,
): Promise<number> {
  const refs = movements.map((m) => m.ref).filter((ref): ref is string => ref !== null);
  const stored = await movementsToMatch(trx, accountId, window.from - MATCH_SLACK_DAYS * DAY, refs);
  const plan = reconcile(stored, movements, () => newId('mov'));
  if (plan.inserts.length === 0 && plan.updates.length === 0) return 0;
  await applyPlan(
    trx,
    { org_id: link.org_id, mode: link.mode, link_id: link.id, account_id: accountId },
    plan,
    now,
  );
  const counts = await movementCounts(trx, accountId);
  await recountAccount(trx, accountId, counts);
  return plan.newMovements;
}

/**
 * What the failed job keeps as its `last_error` (`svc links inspect` shows it): the code, and for data a
 * consent bank sent that broke its schema, the reason too, which names fields and rules, never values; so
 * does any reason the appliance's own connectors give (`ConnectorError.reason`: rate-limited until when,
 * a refused token, a call the consent does not cover). Other messages stay out: a gateway's words are not
 * ours to vouch for.
 */
function jobErrorOf(error: { code: string; message?: string; reason?: string }): string {
  const reason = error.code === 'invalid_bank_data' && error.message ? error.message : error.reason;
  return reason ? `${error.code}: ${reason}`.slice(0, 500) : error.code;
}

async function recordFailure(
  trx: Knex,
  services: SyncServices,
  job: JobRow,
  link: LinkRow,
  error: { code: string; retryAt?: number },
  now: number,
): Promise<void> {
  if (!(await failJob(trx, job, jobErrorOf(error), now)))
    throw new LeaseLostError(`job ${job.id} lost its lease`);
  const { expired } = await markLinkSyncFailed(
    trx,
    link,
    {
      errorCode: error.code,
      failuresToExpire: services.config.sync.failuresToExpire,
      // A bank that said when to come back is not called before then, even by the schedule.
      nextSyncAt: Math.max(now + (await syncIntervalMs(trx, services, link)), error.retryAt ?? 0),
      reconnectOf: (JSON.parse(job.payload ?? '{}') as SyncPayload).reconnect_of ?? null,
    },
    now,
  );
  await recordSyncOutcome(trx, { bankId: link.bank_id, mode: link.mode, errorCode: error.code, now });
  const owner = { orgId: link.org_id, mode: link.mode, linkId: link.id };
  if (job.refresh_intent_id) {
    const intent = await findIntent(trx, job.refresh_intent_id);
    if (intent) {
      await failIntent(trx, intent.id, error.code, now);
      await publishEvent(trx, {
        ...owner,
        type: 'refresh_intent.failed',
        data: refreshIntentFailed({
          id: intent.id,
          link_id: link.id,
          error_code: error.code,
          completed_at: now,
        }),
        now,
      });
    }
  }
  if (expired) {
    await publishEvent(trx, {
      ...owner,
      type: 'link.expired',
      data: linkExpired({ id: link.id, last_error_code: error.code, expired_at: now }),
      now,
    });
  }
}
