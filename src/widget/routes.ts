import { defineRoute, type JsonSchema } from '../api/route.js';
import { BANK_ID_PATTERN, PRODUCTS } from '../banks/institutions.js';
import { linkPolicy } from '../links/routes.js';
import { widgetTokenBody } from './schemas.js';
import { createWidgetToken } from './widget-tokens.js';

const nullableString = { type: ['string', 'null'] };

export const widgetComponents: Record<string, JsonSchema> = {
  WidgetToken: {
    type: 'object',
    additionalProperties: false,
    required: [
      'object',
      'id',
      'token',
      'expires_at',
      'intent',
      'product',
      'institution_id',
      'username_prefill',
      'external_user_id',
      'link_id',
      'connection_limit',
      'locale',
      'redirect_uri',
      'state',
      'widget_url',
      'created_at',
      'mode',
    ],
    properties: {
      object: { const: 'widget_token' },
      id: { type: 'string', pattern: '^wt_[0-9a-f]{8}$' },
      token: {
        type: 'string',
        pattern: '^wt_[0-9a-f]{8}_sec_[0-9A-Za-z]{32}$',
        description: 'Shown once; open the widget with it within expires_at (single use)',
      },
      expires_at: { type: 'string', format: 'date-time' },
      intent: { enum: ['connect', 'reconnect'] },
      product: { enum: PRODUCTS },
      institution_id: { type: ['string', 'null'], pattern: BANK_ID_PATTERN },
      username_prefill: { ...nullableString, description: 'The RUT, formatted (12.345.678-5)' },
      external_user_id: nullableString,
      link_id: { type: ['string', 'null'], pattern: '^link_[0-9a-f]{16}$' },
      connection_limit: { type: ['integer', 'null'], minimum: 1 },
      locale: {
        type: ['string', 'null'],
        enum: ['es', 'en', null],
        description: "The language asked for; null: the browser's, else the operator's default",
      },
      redirect_uri: {
        ...nullableString,
        description: 'The hosted flow: where the widget returns with exchange_token and state',
      },
      state: nullableString,
      widget_url: {
        type: 'string',
        format: 'uri',
        description:
          'The hosted widget for this token: embed.js opens it with the page origin added; with a redirect_uri it also works as a plain link (a full page or a mobile web view)',
      },
      created_at: { type: 'string', format: 'date-time' },
      mode: { enum: ['live', 'test'] },
    },
  },
};

export const widgetTokenRoutes = [
  defineRoute({
    method: 'post',
    path: '/v1/widget_tokens',
    operationId: 'createWidgetToken',
    summary:
      'Issue a single-use widget token (10 minutes) to open the hosted widget: connect a new bank, reconnect an expired link, or renew the consent of a consent link',
    tag: 'widget',
    auth: ['secret_key', 'publishable_key'],
    browser: true,
    body: widgetTokenBody,
    responses: {
      200: { description: 'The token (shown once)', schema: { $ref: '#/components/schemas/WidgetToken' } },
      404: {
        description: '`resource_missing`: a reconnect names a link that is not yours, or none',
        schema: { $ref: '#/components/schemas/Error' },
      },
      409: {
        description:
          '`link_not_expired`: a reconnect names an active link that connects with a bank login (a consent link may be renewed at any time)',
        schema: { $ref: '#/components/schemas/Error' },
      },
    },
    async handler({ services, principal, body, now }) {
      return {
        body: await services.db.transaction((trx) =>
          createWidgetToken(trx, principal, body, {
            policy: linkPolicy(services),
            ttlMs: services.config.widget.tokenTtlMinutes * 60_000,
            baseUrl: services.config.api.baseUrl,
            allowedRedirectUris: services.config.widget.allowedRedirectUris,
            now,
          }),
        ),
      };
    },
  }),
];
