import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import { ApiError, errors } from '../errors/api-error.js';
import type { Principal } from '../auth/principal.js';
import { findOwned } from '../auth/ownership.js';
import { generateWidgetToken } from '../auth/tokens.js';
import { sha256Hex } from '../secrets/secret-box.js';
import { findRegistration } from '../banks/consent/registrations.js';
import { connectionMethod, findInstitution, offers, type Product } from '../banks/institutions.js';
import { formatRut, normaliseRut } from '../rut/rut.js';
import type { LinkPolicy } from '../links/links.js';
import { countLinksOfUser, type LinkRow } from '../links/store.js';
import { findGrantRow } from '../links/consent/grants.js';
import { lockOrganisation } from '../orgs/orgs.js';
import { REDIRECT_URI_MAX_LENGTH, type WidgetTokenInput } from './schemas.js';
import type { Locale } from '../html/locale.js';
import { refuse } from './problems.js';

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
  locale: Locale | null;
  redirect_uri: string | null;
  state: string | null;
  expires_at: number;
  consumed_at: number | null;
  created_at: number;
  /** Who issued it (`key:<key id>`); null on tokens of a build before issue 44. */
  issued_by: string | null;
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
  locale: Locale | null;
  redirect_uri: string | null;
  state: string | null;
  /** The hosted widget for this token; `embed.js` adds the opener's origin when it opens it. */
  widget_url: string;
  created_at: string;
  mode: 'live' | 'test';
}

/**
 * Whether the widget may reconnect a link: one that connects with a bank login once it expired (until then
 * its login works); a consent link at any time, which renews its consent in place, early included (users
 * ask to renew before the end while syncs keep working: OPEN-FINANCE.md). Pure.
 */
export function reconnectable(link: Pick<LinkRow, 'status'>, consentLink: boolean): boolean {
  return link.status === 'expired' || consentLink;
}

/** Whether the link connects by consent (it holds a grant). */
export async function isConsentLink(db: Knex, linkId: string): Promise<boolean> {
  return (await findGrantRow(db, linkId)) !== undefined;
}

/** The token a connect or reconnect session was opened with; a session without one has ended. */
export async function widgetTokenOf(
  trx: Knex,
  session: { widget_token_id: string | null },
): Promise<WidgetTokenRow> {
  const row: WidgetTokenRow | undefined = await trx('widget_tokens')
    .where({ id: session.widget_token_id })
    .first();
  if (!row) throw refuse('session_expired', 401);
  return row;
}

/**
 * The token's `connection_limit`: refused when its end user already has that many links. With `lock`, in
 * the transaction that creates the link, the organisation's row is locked first: on Postgres this makes a
 * second widget wait for the first to commit (SQLite writers are serialised already), so two widgets
 * racing for the last slot cannot both create a link.
 */
export async function refuseOverConnectionLimit(
  trx: Knex,
  session: { org_id: string; mode: 'live' | 'test' },
  token: WidgetTokenRow,
  options: { lock?: boolean } = {},
): Promise<void> {
  if (token.connection_limit === null || token.external_user_id === null) return;
  if (options.lock) await lockOrganisation(trx, session.org_id);
  const owner = { orgId: session.org_id, mode: session.mode, externalUserId: token.external_user_id };
  if ((await countLinksOfUser(trx, owner)) >= token.connection_limit)
    throw refuse('connection_limit_reached', 409, { connectionLimit: token.connection_limit });
}

/** The rest of who, for an audit row of the widget: its token and the key that issued the token. */
export function widgetAuditDetails(token: Pick<WidgetTokenRow, 'id' | 'issued_by'>): Record<string, unknown> {
  return { widget_token: token.id, issued_by: token.issued_by };
}

/**
 * Retention: removes up to `limit` widget tokens that expired before `cutoff`, oldest first. A token a
 * session still points at stays until that session goes (its foreign key would take the session with it).
 * Walks `widget_tokens_expires_at_idx`; the session check reads `widget_sessions_token_idx`.
 */
export async function pruneExpiredWidgetTokens(trx: Knex, cutoff: number, limit: number): Promise<number> {
  const ids = trx('widget_tokens')
    .select('id')
    .where('expires_at', '<', cutoff)
    .whereNotExists(
      trx('widget_sessions')
        .select(trx.raw('1'))
        .whereRaw('widget_sessions.widget_token_id = widget_tokens.id'),
    )
    .orderBy([{ column: 'expires_at' }, { column: 'id' }])
    .limit(limit);
  return trx('widget_tokens').whereIn('id', ids).delete();
}

/**
 * Checks a widget token request in the order a person would fix it, then stores the token's hash. A
 * `reconnect` names a link of the caller's organisation and mode that may be reconnected (`reconnectable`); `connection_limit` counts the
 * links of one `external_user_id`, so it needs one.
 */
export async function createWidgetToken(
  trx: Knex,
  principal: Principal,
  input: WidgetTokenInput,
  options: {
    policy: LinkPolicy;
    ttlMs: number;
    baseUrl: string;
    now: number;
    allowedRedirectUris: readonly string[];
  },
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
    // A reconnect names a link, and the widget it opens checks who signs in against the link's holder: from a
    // publishable key (public by design) it would let anyone who learns a link id find out whose RUT or CPF
    // a link holds, or whether a link exists. Only the tenant's backend may ask (docs/security.md, "Who holds
    // a link"). Refused before the link is looked up, so the answer says nothing about it.
    if (principal.kind === 'publishable_key')
      throw new ApiError(
        403,
        'permission_error',
        'insufficient_scope',
        'A reconnect token names a link: create it from your backend with a secret key. A publishable key creates "connect" tokens only.',
        'intent',
      );
    if (input.link_id === undefined)
      throw errors.missingParameter('link_id', 'Intent "reconnect" needs the link_id of the expired link.');
    if (input.connection_limit !== undefined)
      throw errors.invalidParameter(
        'connection_limit',
        'connection_limit applies to intent "connect": a reconnect creates no link.',
      );
    link = await findOwned<LinkRow>(trx, 'links', input.link_id, principal, 'link');
    if (!reconnectable(link, await isConsentLink(trx, link.id))) {
      throw errors.conflict(
        'link_not_expired',
        `Link ${link.id} is ${link.status}; a link that connects with a bank login is reconnected once it expired. Refresh it with POST /v1/refresh_intents instead.`,
      );
    }
  }
  let institutionId: string | null = null;
  if (input.institution_id !== undefined) {
    const institution = findInstitution(input.institution_id, options.policy.institutions);
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
    // As the widget lists banks (http.ts): a consent bank through its registration, which it has no
    // connector besides; a credential bank through its connector.
    const registered = (await findRegistration(trx, institution.id, principal.mode)) !== undefined;
    const available =
      connectionMethod(institution, principal.mode, registered) === 'consent'
        ? registered
        : options.policy.bankAvailable(institution.id, principal.mode);
    if (!available)
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

  let redirectUri: string | null = null;
  if (input.redirect_uri !== undefined) {
    const checked = checkRedirectUri(input.redirect_uri, options.allowedRedirectUris, principal.mode);
    if ('problem' in checked) throw errors.invalidParameter('redirect_uri', checked.problem);
    redirectUri = checked.uri;
  }
  if (input.state !== undefined && redirectUri === null)
    throw errors.invalidParameter(
      'state',
      'state is returned to redirect_uri; send a redirect_uri too (the embedded flow keeps its own state).',
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
    locale: input.locale ?? null,
    redirect_uri: redirectUri,
    state: input.state ?? null,
    expires_at: options.now + options.ttlMs,
    consumed_at: null,
    created_at: options.now,
    issued_by: principal.actor,
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
    locale: row.locale,
    redirect_uri: row.redirect_uri,
    state: row.state,
    widget_url: `${options.baseUrl}/widget?token=${encodeURIComponent(token)}`,
    created_at: toIso(row.created_at)!,
    mode: row.mode,
  };
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * Why `redirect_uri` may not receive exchange tokens, or null when it may. It must be an absolute URL
 * without credentials or fragment, `https` (plain `http` only to a loopback host, and only in test mode), and
 * match an entry of `widget.allowedRedirectUris`: exactly, or, for an entry ending in `/`, by having the
 * entry's origin and its path as a prefix of its own (the query is free). Paths are compared after URL
 * parsing, so `/cb/../admin` is `/admin` and cannot slip under `/cb/`; and a path that a server would read as
 * another once it decodes it is refused (pathDecodingProblem). Answers the URL as parsed (normalised), which is
 * what is stored and where the widget redirects.
 */
export function checkRedirectUri(
  value: string,
  allowed: readonly string[],
  mode: 'live' | 'test',
): { uri: string } | { problem: string } {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { problem: 'redirect_uri must be an absolute URL, e.g. https://app.example.com/bank/callback.' };
  }
  // Percent-encoding can triple what was sent (each non-ASCII byte becomes %XX): the stored form must fit too.
  if (url.href.length > REDIRECT_URI_MAX_LENGTH)
    return {
      problem: `redirect_uri is longer than ${REDIRECT_URI_MAX_LENGTH} characters once percent-encoded (${url.href.length}).`,
    };
  const problem = redirectUriProblem(url, value, allowed, mode);
  return problem ? { problem } : { uri: url.href };
}

function redirectUriProblem(
  url: URL,
  value: string,
  allowed: readonly string[],
  mode: 'live' | 'test',
): string | null {
  if (url.username || url.password || url.hash || value.includes('#'))
    return 'redirect_uri may not carry credentials or a #fragment.';
  const loopback = LOOPBACK_HOSTS.has(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback && mode === 'test'))
    return mode === 'test'
      ? 'redirect_uri must use https (http only to 127.0.0.1, localhost or [::1] in test mode).'
      : 'redirect_uri must use https in live mode.';
  const decoding = pathDecodingProblem(url.pathname);
  if (decoding) return `redirect_uri ${decoding}`;
  for (const entry of allowed) {
    let base: URL;
    try {
      base = new URL(entry);
    } catch {
      continue;
    }
    if (url.href === base.href) return null;
    if (
      base.pathname.endsWith('/') &&
      !base.search &&
      url.origin === base.origin &&
      url.pathname.startsWith(base.pathname)
    )
      return null;
  }
  return allowed.length === 0
    ? 'This appliance accepts no redirect_uri: the operator has not set widget.allowedRedirectUris.'
    : `redirect_uri ${url.origin}${url.pathname} is not in the operator's widget.allowedRedirectUris.`;
}

/** Decodings tried on a path segment: `%252F` is `%2F` after one and `/` after two. */
const MAX_DECODINGS = 3;

/**
 * Why a parsed URL path would name another path once a server percent-decodes it, or null. The URL parser
 * has already resolved `.`, `..` and their `%2e` spellings; what it leaves are segments that decode to a
 * separator (`..%2Fadmin` is `../admin` to a server that decodes before routing), to a dot segment
 * (`%252e%252e`), and empty segments (`/hooks//evil.example/`, which some routers and redirects read as a
 * host). Each segment is decoded until it stops changing.
 */
export function pathDecodingProblem(pathname: string): string | null {
  const segments = pathname.split('/').slice(1);
  for (const [index, segment] of segments.entries()) {
    if (segment === '' && index < segments.length - 1) return 'may not have a doubled slash in its path.';
    let decoded = segment;
    for (let round = 0; round < MAX_DECODINGS; round++) {
      let next: string;
      try {
        next = decodeURIComponent(decoded);
      } catch {
        return 'has malformed percent-encoding in its path.';
      }
      if (/[/\\]/.test(next)) return 'may not have an encoded separator (%2F, %5C) in its path.';
      if (next === '.' || next === '..') return 'may not have an encoded dot segment in its path.';
      if (next === decoded) break;
      decoded = next;
    }
  }
  return null;
}
