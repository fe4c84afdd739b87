import type { RateGroup, RateLimit } from '../config/defaults.js';
import type { Mode } from '../keys/key-format.js';

export type CredentialKind = 'secret_key' | 'publishable_key' | 'widget_token' | 'exchange_token';

/** Who is calling, as established by the `Authorization` header. */
export interface Principal {
  kind: CredentialKind;
  orgId: string;
  mode: Mode;
  /** The key or token id: for logs and rate limits; never the credential itself. */
  credentialId: string;
  /**
   * Who acts, as the audit log names them: `key:<key id>` for an API key, `console:<user id>` for a console
   * user, `cli:<os user>` for an operator's command, `<token kind>:<token id>` for the widget's tokens.
   */
  actor: string;
  /** Rate buckets are per key; a publishable key is charged to its organisation's secret key of its mode. */
  bucketId: string;
  limits: Record<RateGroup, RateLimit>;
  /**
   * An API key's organisation-wide bucket (issue 44, item 2): every key of the organisation in this mode is
   * charged to it too, at the organisation's ceilings, so issuing more keys does not multiply the ceiling.
   */
  organisation?: { bucketId: string; ceilings: Record<RateGroup, RateLimit> };
}

/**
 * Whether a person acts (in the console or with the CLI) rather than an integration's key or token. A
 * person's refresh is an operator's action and goes in the audit log; an integration's refreshes are its
 * traffic (thousands a day), recorded by the refresh intents themselves.
 */
export function actedByPerson(principal: Pick<Principal, 'actor'>): boolean {
  return principal.actor.startsWith('console:') || principal.actor.startsWith('cli:');
}

/**
 * An operator acting on an organisation's resource from the CLI, as its owner: its organisation, in its
 * mode. Never a credential: nothing authenticates with it.
 */
export function operatorPrincipal(orgId: string, mode: Mode, actor: string): Principal {
  return {
    kind: 'secret_key',
    orgId,
    mode,
    credentialId: 'cli',
    actor,
    bucketId: 'cli',
    limits: {} as Principal['limits'],
  };
}

/** What each credential kind may call, from the spec's Authentication table. */
export const SCOPES: Record<CredentialKind, string[]> = {
  secret_key: ['links:read', 'links:write', 'accounts:read', 'movements:read', 'refresh_intents:write'],
  publishable_key: ['widget_tokens:write'],
  widget_token: ['widget:open'],
  exchange_token: ['exchange'],
};
