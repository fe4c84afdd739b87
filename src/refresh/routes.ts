import { defineRoute, type JsonSchema } from '../api/route.js';
import { getIntent, mfaExpiredError, requestRefresh, submitMfaCode } from './refresh.js';

const ref = { $ref: '#/components/schemas/RefreshIntent' };
const intentParams = {
  type: 'object',
  required: ['intentId'],
  properties: { intentId: { type: 'string', pattern: '^ri_[0-9a-f]{16}$' } },
} as const;

export const refreshComponents: Record<string, JsonSchema> = {
  RefreshIntent: {
    type: 'object',
    required: ['object', 'id', 'link_id', 'status', 'refresh_type', 'created_at', 'mode'],
    properties: {
      object: { const: 'refresh_intent' },
      id: { type: 'string', pattern: '^ri_[0-9a-f]{16}$' },
      link_id: { type: 'string' },
      status: { enum: ['created', 'in_progress', 'requires_mfa', 'succeeded', 'failed'] },
      refresh_type: { enum: ['only_last', 'historical', 'full', 'backfill'] },
      created_at: { type: 'string', format: 'date-time' },
      completed_at: { type: ['string', 'null'], format: 'date-time' },
      error_code: { type: ['string', 'null'] },
      summary: {
        type: ['object', 'null'],
        required: ['accounts_updated', 'new_movements_count'],
        properties: { accounts_updated: { type: 'integer' }, new_movements_count: { type: 'integer' } },
      },
      requires_mfa: {
        type: ['object', 'null'],
        description:
          'While the bank waits for a code: open the widget with widget_token, or POST the code to /mfa',
        required: ['widget_token', 'expires_at'],
        properties: { widget_token: { type: 'string' }, expires_at: { type: 'string', format: 'date-time' } },
      },
      mode: { enum: ['live', 'test'] },
    },
  },
};

export const refreshRoutes = [
  defineRoute({
    method: 'post',
    path: '/v1/refresh_intents',
    operationId: 'createRefreshIntent',
    summary:
      'Refresh a link now: only_last (recent movements, 5-minute cooldown) or historical (60 days, 60-minute cooldown)',
    tag: 'refresh_intents',
    auth: ['secret_key'],
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['link_id'],
      properties: {
        link_id: { type: 'string', pattern: '^link_[0-9a-f]{16}$' },
        refresh_type: { enum: ['only_last', 'historical'], default: 'only_last' },
      },
    },
    responses: {
      200: { description: 'The intent, queued', schema: ref },
      409: {
        description: '`refresh_cooldown` (with Retry-After), `refresh_in_progress` or `link_expired`',
        schema: { $ref: '#/components/schemas/Error' },
      },
    },
    async handler({ services, principal, body, now }) {
      const input = { link_id: body.link_id, refresh_type: body.refresh_type ?? 'only_last' };
      return {
        body: await services.db.transaction((trx) =>
          requestRefresh(trx, principal, input, services.config, now),
        ),
      };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/refresh_intents/{intentId}',
    operationId: 'getRefreshIntent',
    summary: 'A refresh intent: its status, summary, error or MFA wait',
    tag: 'refresh_intents',
    auth: ['secret_key'],
    params: intentParams,
    responses: { 200: { description: 'The intent', schema: ref } },
    async handler({ services, principal, params }) {
      return { body: await getIntent(services.db.reader, principal, params.intentId, services.secrets) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/refresh_intents/{intentId}/mfa',
    operationId: 'submitRefreshIntentMfa',
    summary: 'Give the code the bank asked for; the refresh resumes where it waited',
    tag: 'refresh_intents',
    auth: ['secret_key'],
    params: intentParams,
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['code'],
      properties: { code: { type: 'string', minLength: 1, maxLength: 32 } },
    },
    responses: {
      200: { description: 'The intent, queued again', schema: ref },
      409: {
        description:
          '`intent_not_waiting_for_mfa`, `mfa_code_in_progress` (a code is being checked) or `mfa_expired` (the intent then failed)',
        schema: { $ref: '#/components/schemas/Error' },
      },
    },
    async handler({ services, principal, params, body, now }) {
      const outcome = await services.db.transaction((trx) =>
        submitMfaCode(trx, principal, params.intentId, body.code, services.secrets, now),
      );
      if ('expired' in outcome) throw mfaExpiredError(outcome.expired);
      return { body: outcome.accepted };
    },
  }),
];
