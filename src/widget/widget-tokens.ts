import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { errors } from '../errors/api-error.js';
import type { Principal } from '../auth/principal.js';
import { findOwned } from '../auth/ownership.js';
import { generateWidgetToken } from '../auth/tokens.js';
import { sha256Hex } from '../secrets/secret-box.js';
import { findInstitution, offers, type Product } from '../banks/institutions.js';
import { formatRut, normaliseRut } from '../rut/rut.js';
import type { LinkPolicy } from '../links/links.js';
import type { LinkRow } from '../links/store.js';
import type { WidgetTokenInput } from './schemas.js';

export type WidgetIntent = 'connect' | 'reconnect';

export type { WidgetTokenInput };

export interface WidgetTokenRow {
  id: string;
  org_id: string;
  mode: 'live' | 'test';
  token_hash: string;
  intent: WidgetIntent;
  product: Product | null;
  institution_id: string | null;
  username_prefill: string | null;
  external_user_id: string | null;
  link_id: string | null;
  connection_limit: number | null;
  expires_at: number;
  consumed_at: number | null;
  created_at: number;
}

export interface WidgetToken {
  object: 'widget_token';
  id: string;
  /** Shown once: only its SHA-256 hash is stored. */
  token: string;
  expires_at: string;
  intent: WidgetIntent;
  product: Product;
  institution_id: string | null;
  username_prefill: string | null;
  external_user_id: string | null;
  link_id: string | null;
  connection_limit: number | null;
  /** The hosted widget for this token; `embed.js` adds the opener's origin when it opens it. */
  widget_url: string;
  created_at: string;
  mode: 'live' | 'test';
}

/**
 * Checks a widget token request in the order a person would fix it, then stores the token's hash. A
 * `reconnect` names an expired link of the caller's organisation and mode; `connection_limit` counts the
 * links of one `external_user_id`, so it needs one.
 */
export async function createWidgetToken(
  trx: Knex,
  principal: Principal,
  input: WidgetTokenInput,
  options: { policy: LinkPolicy; ttlMs: number; baseUrl: string; now: number },
): Promise<WidgetToken> {
  const intent = input.intent ?? 'connect';
  const product = input.product ?? 'movements';
  let link: LinkRow | null = null;
  if (intent === 'connect' && input.link_id !== undefined) {
    throw errors.invalidParameter(
      'link_id',
      'link_id is for intent "reconnect" (an expired link); a "connect" token creates a new link.',
    );
  }
  if (intent === 'reconnect') {
    if (input.link_id === undefined)
      throw errors.missingParameter('link_id', 'Intent "reconnect" needs the link_id of the expired link.');
    if (input.connection_limit !== undefined)
      throw errors.invalidParameter(
        'connection_limit',
        'connection_limit applies to intent "connect": a reconnect creates no link.',
      );
    link = await findOwned<LinkRow>(trx, 'links', input.link_id, principal, 'link');
    if (link.status !== 'expired') {
      throw errors.conflict(
        'link_not_expired',
        `Link ${link.id} is ${link.status}; only an expired link is reconnected. Refresh it with POST /v1/refresh_intents instead.`,
      );
    }
  }
  let institutionId: string | null = null;
  if (input.institution_id !== undefined) {
    const institution = findInstitution(input.institution_id);
    if (!institution)
      throw errors.invalidParameter(
        'institution_id',
        `Unknown bank '${input.institution_id}'. GET /v1/institutions lists the bank codes.`,
      );
    if (link && link.bank_id !== institution.id)
      throw errors.invalidParameter(
        'institution_id',
        `Link ${link.id} is with ${link.bank_id}, not ${institution.id}; leave institution_id out to reconnect it.`,
      );
    if (!offers(institution, product, 'individual') && !offers(institution, product, 'business'))
      throw errors.invalidParameter('institution_id', `${institution.name} does not offer ${product}.`);
    if (!options.policy.bankAvailable(institution.id, principal.mode))
      throw errors.badRequest(
        'institution_unavailable',
        `${institution.name} is not available in ${principal.mode} mode on this appliance.`,
      );
    institutionId = institution.id;
  }
  let prefill: string | null = null;
  if (input.username_prefill !== undefined) {
    prefill = normaliseRut(input.username_prefill);
    if (!prefill)
      throw errors.invalidParameter(
        'username_prefill',
        'username_prefill must be a RUT with a valid check digit, e.g. 12.345.678-5.',
      );
  }
  if (input.connection_limit !== undefined && input.external_user_id === undefined)
    throw errors.missingParameter(
      'external_user_id',
      'connection_limit counts the links of one external_user_id; send it too.',
    );

  const { id, token } = generateWidgetToken();
  const row: WidgetTokenRow = {
    id,
    org_id: principal.orgId,
    mode: principal.mode,
    token_hash: sha256Hex(token),
    intent,
    product,
    institution_id: institutionId ?? link?.bank_id ?? null,
    username_prefill: prefill,
    external_user_id: input.external_user_id ?? link?.external_user_id ?? null,
    link_id: link?.id ?? null,
    connection_limit: input.connection_limit ?? null,
    expires_at: options.now + options.ttlMs,
    consumed_at: null,
    created_at: options.now,
  };
  await trx('widget_tokens').insert(row);
  return {
    object: 'widget_token',
    id,
    token,
    expires_at: toIso(row.expires_at)!,
    intent,
    product,
    institution_id: row.institution_id,
    username_prefill: prefill ? formatRut(prefill) : null,
    external_user_id: row.external_user_id,
    link_id: row.link_id,
    connection_limit: row.connection_limit,
    widget_url: `${options.baseUrl}/widget?token=${encodeURIComponent(token)}`,
    created_at: toIso(row.created_at)!,
    mode: row.mode,
  };
}
