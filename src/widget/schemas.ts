import type { FromSchema } from 'json-schema-to-ts';
import { BANK_IDS, PRODUCTS } from '../banks/institutions.js';

/** The body of POST /v1/widget_tokens: the route's validator and document, and the service's input. */
export const widgetTokenBody = {
  type: 'object',
  additionalProperties: false,
  properties: {
    intent: {
      enum: ['connect', 'reconnect'],
      default: 'connect',
      description: '`reconnect` needs `link_id` of an expired link',
    },
    product: { enum: PRODUCTS, default: 'movements', description: 'Banks offering it are listed' },
    institution_id: {
      type: 'string',
      minLength: 1,
      maxLength: 24,
      description: `Preselect a bank: one of ${BANK_IDS.join(', ')}`,
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
      description: 'The expired link to reconnect',
    },
    connection_limit: {
      type: 'integer',
      minimum: 1,
      maximum: 1000,
      description: 'At most this many links for external_user_id; the widget refuses another',
    },
  },
} as const;

/**
 * What createWidgetToken takes. Defaulted fields stay optional here: the route's validator fills them in,
 * and the service supplies the same defaults for a caller that leaves them out.
 */
export type WidgetTokenInput = FromSchema<typeof widgetTokenBody, { keepDefaultedPropertiesOptional: true }>;
