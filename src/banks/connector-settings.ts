import type { FromSchema } from 'json-schema-to-ts';

/**
 * One live-mode connector's settings, `banks.connectors.<bank>` in the configuration. The bank side owns
 * them (with the bank codes, institutions.ts) and config/schema.ts composes them into the configuration's
 * schema, so banks/ never imports config/ and config/ takes only these two from banks/.
 */
export const connectorSettingsSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['url', 'secret'],
  properties: {
    url: {
      type: 'string',
      pattern: '^https?://',
      description:
        'Base URL of a gateway that speaks the HTTP connector protocol (docs/connector-protocol.md)',
    },
    secret: {
      type: 'string',
      minLength: 16,
      description: 'Shared secret that signs every request to the gateway',
    },
    timeoutMs: {
      type: 'integer',
      minimum: 100,
      default: 15000,
      description: 'Deadline of one gateway request',
    },
  },
} as const;

/** The settings as validation leaves them: `timeoutMs` is filled in with its default. */
export type BankConnectorSettings = Required<FromSchema<typeof connectorSettingsSchema>>;
