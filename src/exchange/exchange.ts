import { randomBytes } from 'node:crypto';
import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { errors } from '../errors/api-error.js';
import type { Principal } from '../auth/principal.js';
import { generateExchangeToken } from '../auth/tokens.js';
import { sha256Hex } from '../secrets/secret-box.js';
import { emitLinkCreated, presentOneLink, type Link } from '../links/links.js';
import type { ConsentView } from '../links/consent/consent-life.js';
import { findLink } from '../links/store.js';

export type ExchangeIntent = 'connect' | 'reconnect';

export interface ExchangeTokenRow {
  id: string;
  org_id: string;
  mode: 'live' | 'test';
  token_hash: string;
  link_id: string;
  widget_token_id: string | null;
  intent: ExchangeIntent;
  expires_at: number;
  consumed_at: number | null;
  created_at: number;
}

/**
 * Issues the `et_…` token a widget hands to its opener when it closes after a successful connect or
 * reconnect. Only its hash is stored; the plaintext goes to the widget once.
 */
export async function issueExchangeToken(
  trx: Knex,
  input: {
    orgId: string;
    mode: 'live' | 'test';
    linkId: string;
    widgetTokenId: string | null;
    intent: ExchangeIntent;
    ttlMs: number;
    now: number;
  },
): Promise<{ token: string; expiresAt: number }> {
  const token = generateExchangeToken();
  const row: ExchangeTokenRow = {
    id: `et_${randomBytes(8).toString('hex')}`,
    org_id: input.orgId,
    mode: input.mode,
    token_hash: sha256Hex(token),
    link_id: input.linkId,
    widget_token_id: input.widgetTokenId,
    intent: input.intent,
    expires_at: input.now + input.ttlMs,
    consumed_at: null,
    created_at: input.now,
  };
  await trx('exchange_tokens').insert(row);
  return { token, expiresAt: row.expires_at };
}

/**
 * Swaps an exchange token for its link, once. The consume is one conditional UPDATE (`consumed_at IS NULL
 * AND expires_at > now`) whose row count decides: of any number of concurrent exchanges exactly one sees
 * 1, on SQLite because writers are serialised, on Postgres because the losers re-check the WHERE after
 * the winner's row lock is released and find `consumed_at` set.
 *
 * A connect's link is born here: `link.created` is emitted in this transaction, after the widget's first
 * sync succeeded, so its `holder_name` is known. A reconnect's token returns the same link and emits
 * nothing (the link was announced when it was first exchanged or created).
 */
export async function redeemExchangeToken(
  trx: Knex,
  principal: Principal,
  token: string,
  view: ConsentView,
): Promise<Link> {
  const { now } = view;
  const hash = sha256Hex(token);
  const consumed = await trx('exchange_tokens')
    .where({ token_hash: hash, org_id: principal.orgId, mode: principal.mode })
    .whereNull('consumed_at')
    .where('expires_at', '>', now)
    .update({ consumed_at: now });
  const row: ExchangeTokenRow | undefined = await trx('exchange_tokens').where({ token_hash: hash }).first();
  if (consumed !== 1) {
    if (!row || row.org_id !== principal.orgId)
      throw errors.notFound('No such exchange token. Check that it was copied whole.', 'tokenId');
    if (row.mode !== principal.mode)
      throw errors.wrongMode(
        `This exchange token was issued in ${row.mode} mode, but a ${principal.mode}-mode key was used.`,
      );
    if (row.consumed_at !== null)
      throw errors.conflict(
        'exchange_token_consumed',
        `This exchange token was already exchanged at ${toIso(row.consumed_at)}; each one is exchanged once. Read the link with GET /v1/links, or open the widget again for a new connection.`,
      );
    throw errors.conflict(
      'exchange_token_expired',
      `This exchange token expired at ${toIso(row.expires_at)} (${Math.round((row.expires_at - row.created_at) / 60_000)} minutes after the widget issued it). Exchange it as soon as the widget reports success, or open the widget again.`,
    );
  }
  const link = await findLink(trx, row!.link_id);
  // The foreign key cascades a deleted link's tokens away, so a consumed row always has its link.
  if (!link) throw errors.notFound('The link of this exchange token was deleted.', 'tokenId');
  if (row!.intent === 'connect') await emitLinkCreated(trx, link, now);
  return presentOneLink(trx, link, view);
}

/**
 * Retention: removes up to `limit` exchange tokens that expired before `cutoff`, oldest first (they live
 * minutes; a redeemed or expired one can never be used again). Walks `exchange_tokens_expires_at_idx`.
 */
export async function pruneExpiredExchangeTokens(trx: Knex, cutoff: number, limit: number): Promise<number> {
  const ids = trx('exchange_tokens')
    .select('id')
    .where('expires_at', '<', cutoff)
    .orderBy([{ column: 'expires_at' }, { column: 'id' }])
    .limit(limit);
  return trx('exchange_tokens').whereIn('id', ids).delete();
}
