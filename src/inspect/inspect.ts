import type { Knex } from 'knex';
import {
  describeRevocation,
  openRevocationsOfLink,
  revocationOfLink,
  REVOKE_ATTEMPTS,
  type GrantRevocationRow,
  type RevocationStatus,
} from '../links/consent/revocations.js';
import { toIso } from '../clock/clock.js';
import { errors } from '../errors/api-error.js';
import { operatorPrincipal, type Principal } from '../auth/principal.js';
import {
  presentLinks,
  presentOneLink,
  UNREADABLE_CREDENTIALS,
  type DeletedLinkState,
  type Link,
} from '../links/links.js';
import { latestAuditOf } from '../audit/audit-log.js';
import { CONSENT_EXPIRED, type ConsentView, type LinkConsent } from '../links/consent/consent-life.js';
import { accountsOfLinkByAge } from '../accounts/store.js';
import { recentEventsOfLink } from '../events/store.js';
import { recentJobsOfLink } from '../jobs/jobs.js';
import { BANK_BUDGET } from '../banks/budget/permits.js';
import { recentIntentsOfLink } from '../refresh/store.js';
import { recentDeliveriesOfLink } from '../webhooks/deliveries.js';
import { findLink, listAllLinks, type LinkRow, type OperatorLinkFilter } from '../links/store.js';

export interface LinkInspection {
  link: Link & {
    org_id: string;
    consecutive_failures: number;
    sync_attempts: number;
    sync_successes: number;
  };
  /** The findings below in the operator's words (what `svc links inspect` prints). */
  diagnosis: string[];
  /** What is wrong (or that nothing is), as codes with their figures, for a page to word in its language. */
  findings: Finding[];
  accounts: {
    id: string;
    name: string;
    type: string;
    currency: string;
    last_4: string | null;
    status: string;
    balance: { available: number | null; current: number | null; limit: number | null };
    movements: number;
    pending: number;
    refreshed_at: string | null;
  }[];
  jobs: {
    id: string;
    status: string;
    refresh_type: string;
    attempts: number;
    run_at: string | null;
    locked_by: string | null;
    locked_until: string | null;
    last_error: string | null;
  }[];
  refresh_intents: {
    id: string;
    refresh_type: string;
    status: string;
    error_code: string | null;
    created_at: string | null;
    completed_at: string | null;
  }[];
  events: { id: string; type: string; created_at: string | null }[];
  deliveries: {
    id: string;
    event_type: string;
    endpoint_id: string;
    status: string;
    attempts: number;
    last_response_status: number | null;
    last_error: string | null;
    next_attempt_at: string | null;
  }[];
}

/**
 * What a deleted consent link leaves for support: whether its bank was told to revoke the grant. The shape of
 * the API's delete answer (`object`, `id`, `deleted`, `deleted_at`), so a script tells it apart by `deleted`.
 * Nothing of the grant itself: its id stays sealed in the row, and the tokens went with the link.
 */
export interface DeletedLinkInspection {
  object: 'link';
  id: string;
  deleted: true;
  deleted_at: string | null;
  org_id: string;
  mode: 'live' | 'test';
  bank_id: string;
  /** Who deleted it, as the audit log names them; null for a deletion of a build before issue 44. */
  deleted_by: string | null;
  /** What the link was when it was deleted (the `link.delete` audit row); null before issue 44. */
  last_state: DeletedLinkState | null;
  /** The revoke of its consent at the bank; null for a link that logged in with a password. */
  grant_revocation: {
    status: RevocationStatus;
    attempts: number;
    /** After this many the revocation is `failed`. */
    max_attempts: number;
    /** The appliance's words and the bank's status or OAuth error code; never a token or the grant id. */
    last_error: string | null;
    /** When the next attempt is due; null once the revocation is settled (revoked or failed). */
    next_attempt_at: string | null;
    revoked_at: string | null;
    /** When it was queued: in the transaction that deleted the link. */
    created_at: string | null;
  } | null;
  /** The deletion and the revocation in the operator's words. */
  diagnosis: string[];
}

const missingLink = (linkId: string) =>
  errors.notFound(
    `No link ${linkId}. (A deleted link leaves only its link.deleted event: try \`svc links list\`.)`,
    'link',
  );

/** Everything support needs to answer "why is this link stale?", with the likely answer first. */
export async function inspectLink(db: Knex, linkId: string, view: ConsentView): Promise<LinkInspection> {
  const row = await findLink(db, linkId);
  if (!row) throw missingLink(linkId);
  return inspectLinkRow(db, row, view);
}

/**
 * `svc links inspect`: a link, or what a deleted consent link left (its grant's revocation); a link that is
 * neither (never existed, or deleted with no grant to revoke) is not found.
 */
export async function inspectLinkOrDeleted(
  db: Knex,
  linkId: string,
  view: ConsentView,
): Promise<LinkInspection | DeletedLinkInspection> {
  const row = await findLink(db, linkId);
  if (row) return inspectLinkRow(db, row, view);
  const deleted = await inspectDeletedLink(db, linkId);
  if (!deleted) throw missingLink(linkId);
  return deleted;
}

/**
 * What a deleted link left: its last state and who deleted it (the `link.delete` audit row) and, for a consent
 * link, its grant's revocation at the bank; null when it left neither (it never existed, or was deleted by a
 * build before issue 44 and had no grant).
 */
export async function inspectDeletedLink(db: Knex, linkId: string): Promise<DeletedLinkInspection | null> {
  const [revocation, deletion] = await Promise.all([
    revocationOfLink(db, linkId),
    latestAuditOf(db, { action: 'link.delete', targetType: 'link', targetId: linkId }),
  ]);
  const lastState = (deletion?.details?.last_state as DeletedLinkState | undefined) ?? null;
  const orgId = revocation?.org_id ?? deletion?.org_id;
  const mode = revocation?.mode ?? lastState?.mode;
  const bankId = revocation?.bank_id ?? lastState?.bank_id;
  if (!orgId || !mode || !bankId) return null;
  return {
    object: 'link',
    id: linkId,
    deleted: true,
    // The revocation is queued in the deleting transaction, at the delete's time.
    deleted_at: deletion?.created_at ?? toIso(revocation?.created_at ?? null),
    org_id: orgId,
    mode,
    bank_id: bankId,
    deleted_by: deletion?.actor ?? null,
    last_state: lastState,
    grant_revocation: revocation
      ? {
          status: revocation.status,
          attempts: revocation.attempts,
          max_attempts: REVOKE_ATTEMPTS,
          last_error: revocation.last_error,
          next_attempt_at: revocation.status === 'pending' ? toIso(revocation.next_attempt_at) : null,
          revoked_at: toIso(revocation.revoked_at),
          created_at: toIso(revocation.created_at),
        }
      : null,
    diagnosis: [
      revocation
        ? describeRevocation(revocation)
        : 'It logged in with a password: there was no consent at the bank to revoke.',
      ...(lastState
        ? [
            `Deleted${deletion ? ` by ${deletion.actor}` : ''} while ${lastState.status}${lastState.paused ? ' and paused' : ''}, with ${lastState.accounts_count} accounts, last synced ${lastState.last_synced_at ?? 'never'}.`,
          ]
        : []),
    ],
  };
}

async function inspectLinkRow(db: Knex, row: LinkRow, view: ConsentView): Promise<LinkInspection> {
  const linkId = row.id;
  const [link, accounts, jobs, intents, events, deliveries, revocations] = await Promise.all([
    presentOneLink(db, row, view),
    accountsOfLinkByAge(db, linkId),
    recentJobsOfLink(db, linkId, 5),
    recentIntentsOfLink(db, linkId, 10),
    recentEventsOfLink(db, linkId, 15),
    recentDeliveriesOfLink(db, linkId, 10),
    openRevocationsOfLink(db, linkId),
  ]);
  const found = findingsOf(row, jobs, view.now, link.consent, revocations);
  return {
    link: {
      ...link,
      org_id: row.org_id,
      consecutive_failures: row.consecutive_failures,
      sync_attempts: row.sync_attempts,
      sync_successes: row.sync_successes,
    },
    diagnosis: found.map((finding) => describeFinding(finding, row.id)),
    findings: found,
    accounts: accounts.map((a) => ({
      id: a.id,
      name: a.name,
      type: a.type,
      currency: a.currency,
      last_4: a.last_4,
      status: a.status,
      balance: { available: a.balance_available, current: a.balance_current, limit: a.balance_limit },
      movements: a.visible_count,
      pending: a.pending_count,
      refreshed_at: toIso(a.refreshed_at),
    })),
    jobs: jobs.map((j) => ({
      id: j.id,
      status: j.status,
      refresh_type: (JSON.parse(j.payload ?? '{}') as { refresh_type?: string }).refresh_type ?? 'scheduled',
      attempts: j.attempts,
      run_at: toIso(j.run_at),
      locked_by: j.locked_by,
      locked_until: toIso(j.locked_until),
      last_error: j.last_error,
    })),
    refresh_intents: intents.map((i) => ({
      id: i.id,
      refresh_type: i.refresh_type,
      status: i.status,
      error_code: i.error_code,
      created_at: toIso(i.created_at),
      completed_at: toIso(i.completed_at),
    })),
    events: events.map((e) => ({ id: e.id, type: e.type, created_at: toIso(e.created_at) })),
    deliveries: deliveries.map((d) => ({
      id: d.id,
      event_type: d.event_type,
      endpoint_id: d.endpoint_id,
      status: d.status,
      attempts: d.attempts,
      last_response_status: d.last_response_status,
      last_error: d.last_error,
      next_attempt_at: toIso(d.next_attempt_at),
    })),
  };
}

const HOUR = 3_600_000;

/** One thing `inspect` found about a link; times are ISO 8601. */
export type Finding =
  /** `reason`: as for `sync_failed`, from the failed job that expired it (why the bank ended a consent). */
  | { code: 'expired'; at: string | null; failures: number; error: string | null; reason: string | null }
  /** The link expired because its consent at the bank ended (`consent_expired`). */
  | { code: 'consent_expired'; at: string | null }
  /** Its consent ends within the warning days: the end user should renew it before then. */
  | { code: 'consent_expiring'; expiresAt: string | null }
  | { code: 'paused'; since: string | null }
  | { code: 'credentials_unreadable' }
  /** `reason`: the appliance's own words on the failure, from the failed job (a consent bank's, say). */
  | { code: 'sync_failed'; error: string; credentialFailures: number; reason: string | null }
  | { code: 'lease_expired' }
  | { code: 'sync_queued' }
  /** The bank asked to be called later (429/529, Retry-After): the job waits until `until`. */
  | { code: 'sync_deferred'; until: string | null; reason: string | null }
  /**
   * The sync waits for its bank's budget (banks/budget/): the calls every scheduler process may make to the
   * bank are spent for now, or the bank paused them all (`Retry-After`); it goes on at `until`.
   */
  | { code: 'waiting_for_budget'; until: string | null; reason: string | null }
  | { code: 'scheduler_late'; nextSyncAt: string | null }
  /**
   * A grant of this link's that the bank must still be told to end (one a renewal replaced, or one the widget
   * refused at the callback, such as another person's): `pending` while the outbox retries, `failed` once it
   * gave up (the bank may hold that consent until it expires). `lastError` keeps the bank's words.
   */
  | {
      code: 'grant_revocation';
      status: 'pending' | 'failed';
      attempts: number;
      nextAttemptAt: string | null;
      lastError: string | null;
    }
  | { code: 'never_synced' }
  | { code: 'healthy'; lastSyncedAt: string | null; nextSyncAt: string | null };

/** A job's `last_error` past its code (`code: reason`), when it is about `code`. */
function reasonOf(lastError: string | null | undefined, code: string): string | null {
  return lastError?.startsWith(`${code}: `) ? lastError.slice(code.length + 2) : null;
}

/** The jobs as `findingsOf` reads them, newest first. */
export interface JobFacts {
  status: string;
  locked_until: number | null;
  run_at?: number;
  last_error?: string | null;
}

export function findingsOf(
  row: LinkRow,
  jobs: JobFacts[],
  now: number,
  consent: LinkConsent | null = null,
  revocations: readonly Pick<
    GrantRevocationRow,
    'status' | 'attempts' | 'next_attempt_at' | 'last_error'
  >[] = [],
): Finding[] {
  const found: Finding[] = [];
  const lastFailed = jobs.find((j) => j.status === 'failed');
  const deferred = jobs.find(
    (j) => j.status === 'queued' && j.run_at !== undefined && j.run_at > now && j.last_error,
  );
  if (row.status === 'expired' && row.last_error_code === CONSENT_EXPIRED)
    found.push({ code: 'consent_expired', at: toIso(row.expired_at) });
  else if (row.status === 'expired')
    found.push({
      code: 'expired',
      at: toIso(row.expired_at),
      failures: row.consecutive_failures,
      error: row.last_error_code,
      reason: row.last_error_code ? reasonOf(lastFailed?.last_error, row.last_error_code) : null,
    });
  if (consent?.status === 'expiring') found.push({ code: 'consent_expiring', expiresAt: consent.expires_at });
  if (row.paused) found.push({ code: 'paused', since: toIso(row.paused_at) });
  if (row.status === 'active' && row.last_error_code === UNREADABLE_CREDENTIALS)
    found.push({ code: 'credentials_unreadable' });
  else if (row.status === 'active' && row.last_error_code)
    found.push({
      code: 'sync_failed',
      error: row.last_error_code,
      credentialFailures: row.consecutive_failures,
      reason: reasonOf(lastFailed?.last_error, row.last_error_code),
    });
  if (jobs.some((j) => j.status === 'running' && j.locked_until !== null && j.locked_until < now))
    found.push({ code: 'lease_expired' });
  if (deferred) {
    const code = deferred.last_error!.split(':')[0]!;
    found.push({
      code: code === BANK_BUDGET ? 'waiting_for_budget' : 'sync_deferred',
      until: toIso(Number(deferred.run_at)),
      reason: reasonOf(deferred.last_error, code),
    });
  } else if (jobs.some((j) => j.status === 'queued')) found.push({ code: 'sync_queued' });
  if (row.status === 'active' && !row.paused && row.next_sync_at !== null && row.next_sync_at < now - HOUR)
    found.push({ code: 'scheduler_late', nextSyncAt: toIso(row.next_sync_at) });
  if (row.last_synced_at === null && row.status === 'active') found.push({ code: 'never_synced' });
  for (const revocation of revocations)
    if (revocation.status === 'pending' || revocation.status === 'failed')
      found.push({
        code: 'grant_revocation',
        status: revocation.status,
        attempts: revocation.attempts,
        nextAttemptAt: revocation.status === 'pending' ? toIso(revocation.next_attempt_at) : null,
        lastError: revocation.last_error,
      });
  if (found.length === 0)
    found.push({
      code: 'healthy',
      lastSyncedAt: toIso(row.last_synced_at),
      nextSyncAt: toIso(row.next_sync_at),
    });
  return found;
}

/** A finding in the operator's words, with the CLI command that acts on it. */
export function describeFinding(finding: Finding, linkId: string): string {
  switch (finding.code) {
    case 'expired':
      // One answer of the bank ends a consent (ENDING_FAILURES): no count of failed logins to give.
      if (finding.error === 'consent_revoked')
        return `Expired ${finding.at}: ${finding.reason ?? 'the bank ended the consent'} (consent_revoked): the user must consent again with a widget token (intent "reconnect").`;
      return `Expired ${finding.at} after ${finding.failures} failed logins (${finding.error}): the user must reconnect it with a widget token (intent "reconnect").`;
    case 'consent_expired':
      return `Expired ${finding.at}: its consent at the bank ended (consent_expired). The end user must renew it with a widget token (intent "reconnect").`;
    case 'consent_expiring':
      return `Its consent at the bank ends ${finding.expiresAt}: the end user should renew it before then with a widget token (intent "reconnect"), or the link expires.`;
    case 'paused':
      return `Paused since ${finding.since}: the scheduler skips it; resume it with \`svc links resume ${linkId}\`.`;
    case 'grant_revocation': {
      const last = finding.lastError ? ` Last error: ${finding.lastError}.` : '';
      return finding.status === 'failed'
        ? `Revoking a grant of this link at the bank (a replaced or refused consent) failed after ${finding.attempts} attempts; the bank may hold that consent until it expires.${last}`
        : `A grant of this link (a replaced or refused consent) is being revoked at the bank: attempt ${finding.attempts + 1} of ${REVOKE_ATTEMPTS} at ${finding.nextAttemptAt}.${last}`;
    }
    case 'credentials_unreadable':
      return 'The last sync failed with credentials_unreadable: the stored bank credentials do not open with any master key this host holds (the row was altered, or master.key lacks the key that sealed it). Restore master.key from the backup, or have the user reconnect the link.';
    case 'sync_failed':
      return `The last sync failed with ${finding.error}${finding.reason ? ` (${finding.reason})` : ''}${finding.credentialFailures > 0 ? ` (${finding.credentialFailures} credential failure(s) in a row; 3 expire the link)` : ' (a bank-side error: retried at the next sync)'}.`;
    case 'lease_expired':
      return 'A sync job holds an expired lease (its worker died); the next free worker takes it over.';
    case 'sync_queued':
      return 'A sync is queued: is a scheduler running (`svc status`)?';
    case 'sync_deferred':
      return `A sync waits until ${finding.until}, when the bank asked to be called again${finding.reason ? ` (${finding.reason})` : ''}.`;
    case 'waiting_for_budget':
      return `A sync is waiting for the bank's budget until ${finding.until}${finding.reason ? ` (${finding.reason.replace(/^waiting for the bank's budget until \S+ \((.*)\)$/, '$1')})` : ''}: the calls all scheduler processes may make to the bank are spent for now (banks.budget in the configuration).`;
    case 'scheduler_late':
      return `next_sync_at passed more than an hour ago (${finding.nextSyncAt}): no scheduler seems to be running.`;
    case 'never_synced':
      return 'It has never synced successfully.';
    case 'healthy':
      return `Healthy: last synced ${finding.lastSyncedAt}, next sync ${finding.nextSyncAt}.`;
  }
}

/** The operator's diagnosis of a link: what `svc links inspect` prints. */
export function diagnose(row: LinkRow, jobs: JobFacts[], now: number): string[] {
  return findingsOf(row, jobs, now).map((finding) => describeFinding(finding, row.id));
}

/** Operators act on any link: the CLI acts as the link's owner (its organisation, in its mode). */
export async function linkOwner(db: Knex, linkId: string, actor: string): Promise<Principal> {
  const row = await findLink(db, linkId);
  if (!row) throw errors.notFound(`No link ${linkId}.`, 'link');
  return operatorPrincipal(row.org_id, row.mode, actor);
}

/** Links across organisations, as `svc links list` shows them: with the organisation each belongs to. */
export async function listLinksForOperator(
  db: Knex,
  filter: OperatorLinkFilter,
  view: ConsentView,
): Promise<(Link & { org_id: string })[]> {
  const rows = await listAllLinks(db, filter);
  const links = await presentLinks(db, rows, view);
  return links.map((link, i) => ({ ...link, org_id: rows[i]!.org_id }));
}
