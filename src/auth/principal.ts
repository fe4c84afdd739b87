import type { RateGroup, RateLimit } from '../config/defaults.js';
import type { Mode } from '../keys/key-format.js';

export type CredentialKind = 'secret_key' | 'publishable_key' | 'widget_token' | 'exchange_token';

/** Who is calling, as established by the `Authorization` header. */
export interface Principal {
  kind: CredentialKind;
  orgId: string;
  mode: Mode;
  /** The key or token id: for logs and the audit log; never the credential itself. */
  credentialId: string;
  /** Rate buckets are per key; a publishable key is charged to its organisation's secret key of its mode. */
  bucketId: string;
  limits: Record<RateGroup, RateLimit>;
}

/** What each credential kind may call, from the spec's Authentication table. */
export const SCOPES: Record<CredentialKind, string[]> = {
  secret_key: ['links:read', 'links:write', 'accounts:read', 'movements:read', 'refresh_intents:write'],
  publishable_key: ['widget_tokens:write'],
  widget_token: ['widget:open'],
  exchange_token: ['exchange'],
};
