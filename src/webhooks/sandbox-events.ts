import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { errors } from '../errors/api-error.js';
import { newId } from '../ids/ids.js';
import type { Principal } from '../auth/principal.js';
import { findOwned } from '../auth/ownership.js';
import { generateIntentToken } from '../auth/tokens.js';
import { emitEvent, type EventRecord } from '../events/outbox.js';
import type { LinkRow } from '../links/links.js';
import { EVENT_TYPES, type EventType } from './event-types.js';

/** How long the made-up MFA token of a fired `refresh_intent.requires_mfa` claims to live (the spec's 10 min). */
const MFA_TOKEN_TTL_MS = 10 * 60_000;

interface AccountRow {
  id: string;
  name: string;
  type: string;
  currency: string;
  last_4: string | null;
  status: string;
}

export interface FireInput {
  type: string;
  link_id: string;
}

export interface SandboxSettings {
  syncIntervalMinutes: number;
}

/**
 * `POST /v1/sandbox/events/fire`: a realistic event of any catalogue type about one of the caller's test
 * links, emitted through the outbox like a real one (so it is stored, listed by `GET /v1/events` and
 * delivered, signed and retried as any other) to the organisation's test-mode endpoints only. Nothing about
 * the link changes and no sync runs: the data is the link as it is, plus what the event would add (a made-up
 * `ri_` refresh intent, a completion time). Account events use one of the link's accounts when it has one.
 */
export async function fireSandboxEvent(
  trx: Knex,
  principal: Principal,
  input: FireInput,
  settings: SandboxSettings,
  now: number,
): Promise<EventRecord> {
  if (principal.mode !== 'test') {
    throw errors.wrongMode('Sandbox events fire in test mode only: use a test secret key (sk_test_…).');
  }
  if (!(EVENT_TYPES as readonly string[]).includes(input.type)) {
    throw errors.invalidParameter(
      'type',
      `Unknown event type '${input.type}'. Known types: ${EVENT_TYPES.join(', ')}.`,
    );
  }
  const type = input.type as EventType;
  const link = await findOwned<LinkRow>(trx, 'links', input.link_id, principal, 'link');
  const data = await sandboxData(trx, type, link, settings, now);
  return emitEvent(trx, { orgId: link.org_id, mode: 'test', type, linkId: link.id, data, now });
}

async function sandboxData(
  trx: Knex,
  type: EventType,
  link: LinkRow,
  settings: SandboxSettings,
  now: number,
): Promise<Record<string, unknown>> {
  const at = toIso(now)!;
  const intent = (status: string) => ({
    object: 'refresh_intent',
    id: newId('ri'),
    link_id: link.id,
    status,
  });
  switch (type) {
    case 'link.created':
      return {
        object: 'link',
        id: link.id,
        bank_id: link.bank_id,
        status: link.status,
        holder_name: link.holder_name,
        created_at: toIso(link.created_at),
      };
    case 'link.refreshed':
      return {
        object: 'link',
        id: link.id,
        status: 'active',
        last_synced_at: at,
        next_sync_at: toIso(now + settings.syncIntervalMinutes * 60_000),
        accounts_count: link.accounts_count,
        new_movements_count: link.new_movements_count,
      };
    case 'link.expired':
      return {
        object: 'link',
        id: link.id,
        status: 'expired',
        last_error_code: 'rejected_credentials',
        expired_at: at,
      };
    case 'link.deleted':
      return { object: 'link', id: link.id, deleted_at: at };
    case 'account.created': {
      const account = await someAccount(trx, link.id);
      return {
        object: 'account',
        id: account.id,
        link_id: link.id,
        name: account.name,
        type: account.type,
        currency: account.currency,
        last_4: account.last_4,
      };
    }
    case 'account.removed': {
      const account = await someAccount(trx, link.id);
      return { object: 'account', id: account.id, link_id: link.id, status: 'removed', removed_at: at };
    }
    case 'refresh_intent.created':
      return { ...intent('created'), refresh_type: 'only_last' };
    case 'refresh_intent.requires_mfa': {
      const base = intent('requires_mfa');
      return {
        ...base,
        // The form of a real one; it opens nothing, since no intent waits behind it.
        requires_mfa: {
          widget_token: generateIntentToken(base.id),
          expires_at: toIso(now + MFA_TOKEN_TTL_MS),
        },
      };
    }
    case 'refresh_intent.succeeded':
      return {
        ...intent('succeeded'),
        completed_at: at,
        summary: { accounts_updated: link.accounts_count, new_movements_count: link.new_movements_count },
      };
    case 'refresh_intent.failed':
      return { ...intent('failed'), error_code: 'bank_unavailable', completed_at: at };
  }
}

/** The link's first active account, else a made-up checking account of the shape the sandbox banks use. */
async function someAccount(trx: Knex, linkId: string): Promise<AccountRow> {
  const row: AccountRow | undefined = await trx('accounts')
    .where({ link_id: linkId })
    .orderByRaw("case when status = 'active' then 0 else 1 end")
    .orderBy('created_at')
    .first('id', 'name', 'type', 'currency', 'last_4', 'status');
  return (
    row ?? {
      id: newId('acc'),
      name: 'Cuenta Corriente',
      type: 'checking',
      currency: 'CLP',
      last_4: String(1000 + (Number.parseInt(linkId.slice(-4), 16) % 9000)),
      status: 'active',
    }
  );
}
