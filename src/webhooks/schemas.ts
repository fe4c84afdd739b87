import type { FromSchema } from 'json-schema-to-ts';

/*
 * The request bodies of the webhooks API, which the console's forms are validated with too (their types
 * derived from them): one statement of what an endpoint, a roll and a fired event may hold.
 */

export const ENDPOINT_PARAMS = {
  type: 'object',
  required: ['endpointId'],
  properties: { endpointId: { type: 'string', pattern: '^we_[0-9a-f]{16}$' } },
} as const;

const eventsList = {
  type: 'array',
  minItems: 1,
  maxItems: 50,
  items: { type: 'string', minLength: 1, maxLength: 64 },
  description: 'Event types to receive; ["*"] for every type, including ones added later',
} as const;
const url = { type: 'string', minLength: 1, maxLength: 2048 } as const;
const description = { type: ['string', 'null'], maxLength: 500 } as const;

export const CREATE_ENDPOINT_BODY = {
  type: 'object',
  additionalProperties: false,
  required: ['url', 'enabled_events'],
  properties: { url, enabled_events: eventsList, description },
} as const;
export type CreateEndpointBody = FromSchema<typeof CREATE_ENDPOINT_BODY>;

export const UPDATE_ENDPOINT_BODY = {
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: { url, enabled_events: eventsList, disabled: { type: 'boolean' }, description },
} as const;

export const ROLL_SECRET_BODY = {
  type: 'object',
  additionalProperties: false,
  properties: {
    grace_seconds: { type: 'integer', minimum: 0, maximum: 604_800, description: 'Default 86400 (24 h)' },
  },
} as const;
export type RollSecretBody = FromSchema<typeof ROLL_SECRET_BODY>;

export const FIRE_EVENT_BODY = {
  type: 'object',
  additionalProperties: false,
  required: ['type', 'link_id'],
  properties: {
    type: { type: 'string', minLength: 1, maxLength: 64, description: 'An event type of the catalogue' },
    link_id: { type: 'string', pattern: '^link_[0-9a-f]{16}$' },
  },
} as const;
export type FireEventBody = FromSchema<typeof FIRE_EVENT_BODY>;
