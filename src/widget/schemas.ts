import type { FromSchema } from 'json-schema-to-ts';
import { BUILT_IN_BANK_IDS, PRODUCTS } from '../banks/institutions.js';

/** The `redirect_uri` column's length (migration 20261125000009), as sent and once normalised. */
export const REDIRECT_URI_MAX_LENGTH = 2048;

/** The body of POST /v1/widget_tokens: the route's validator and document, and the service's input. */
export const widgetTokenBody = {
  type: 'object',
  additionalProperties: false,
  properties: {
    intent: {
      enum: ['connect', 'reconnect'],
      default: 'connect',
      description:
        '`reconnect` needs `link_id`: an expired link, or a consent link at any time (the widget renews its consent in place)',
    },
    product: { enum: PRODUCTS, default: 'movements', description: 'Banks offering it are listed' },
    institution_id: {
      type: 'string',
      minLength: 1,
      maxLength: 24,
      description: `Preselect a bank: one of ${BUILT_IN_BANK_IDS.join(', ')}, or a bank the operator added (GET /v1/institutions)`,
    },
    username_prefill: {
      type: 'string',
      minLength: 1,
      maxLength: 20,
      description: "The user's RUT, shown in the form (with or without dots)",
    },
    external_user_id: { type: 'string', minLength: 1, maxLength: 255 },
    link_id: {
      type: 'string',
      pattern: '^link_[0-9a-f]{16}$',
      description: 'The link to reconnect: an expired one, or a consent link whose consent to renew',
    },
    connection_limit: {
      type: 'integer',
      minimum: 1,
      maximum: 1000,
      description: 'At most this many links for external_user_id; the widget refuses another',
    },
    locale: {
      enum: ['es', 'en'],
      description:
        "The widget's language: `es` (Spanish, Chile) or `en`. Without it, the browser's language, else the operator's `widget.locale`",
    },
    redirect_uri: {
      type: 'string',
      minLength: 1,
      maxLength: REDIRECT_URI_MAX_LENGTH,
      description:
        "The hosted flow: widget_url works as a plain link, and the widget returns here with `exchange_token` (and `state`) in the query. Must match the operator's `widget.allowedRedirectUris`; https only (http to a loopback host in test mode)",
    },
    state: {
      type: 'string',
      minLength: 1,
      maxLength: 500,
      description: 'Returned unchanged to redirect_uri (with it only), for your CSRF check',
    },
  },
} as const;

/**
 * What createWidgetToken takes. Defaulted fields stay optional here: the route's validator fills them in,
 * and the service supplies the same defaults for a caller that leaves them out.
 */
export type WidgetTokenInput = FromSchema<typeof widgetTokenBody, { keepDefaultedPropertiesOptional: true }>;
