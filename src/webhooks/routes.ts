import { defineRoute, type JsonSchema } from '../api/route.js';
import { CREATE_ENDPOINT_BODY, ENDPOINT_PARAMS, ROLL_SECRET_BODY, UPDATE_ENDPOINT_BODY } from './schemas.js';
import { defineListRoute } from '../api/list-route.js';
import type { AppServices } from '../api/services.js';
import {
  createEndpoint,
  deleteEndpoint,
  getEndpoint,
  listEndpoints,
  rollEndpointSecret,
  updateEndpoint,
  type EndpointPolicy,
} from './endpoints.js';

const ref = { $ref: '#/components/schemas/WebhookEndpoint' };
function policy(services: AppServices): EndpointPolicy {
  return { secrets: services.secrets, addresses: services.config.webhooks };
}

export const webhookComponents: Record<string, JsonSchema> = {
  WebhookEndpoint: {
    type: 'object',
    required: [
      'object',
      'id',
      'url',
      'enabled_events',
      'disabled',
      'disabled_reason',
      'failing_since',
      'unanswered_attempts',
      'backoff_until',
      'mode',
      'created_at',
      'updated_at',
    ],
    properties: {
      object: { const: 'webhook_endpoint' },
      id: { type: 'string', pattern: '^we_[0-9a-f]{16}$' },
      url: { type: 'string' },
      description: { type: ['string', 'null'] },
      enabled_events: { type: 'array', items: { type: 'string' } },
      disabled: { type: 'boolean' },
      disabled_reason: {
        enum: ['requested', 'failing', null],
        description:
          'Why it is disabled: `requested` (PATCH disabled=true, or an operator), or `failing`: every attempt failed for `webhooks.disableAfterFailingDays` (3 by default), its pending deliveries ended `failed` and a `webhook_endpoint.disabled` event was emitted. Null while enabled',
      },
      failing_since: {
        type: ['string', 'null'],
        format: 'date-time',
        description:
          'When its attempts began to fail with no 2xx since (any other answer, or none, fails); null while its latest attempt succeeded. Enabling it again clears it',
      },
      unanswered_attempts: {
        type: 'integer',
        minimum: 0,
        description:
          'Latest attempts in a row that got no HTTP answer (timed out, refused); a 2xx answer resets it',
      },
      backoff_until: {
        type: ['string', 'null'],
        format: 'date-time',
        description:
          'Set once attempts keep going unanswered: no delivery is attempted before it (nor charged an attempt for the wait). An update of the endpoint or a redelivery ends it; a time in the past means the next attempt decides',
      },
      mode: { enum: ['live', 'test'] },
      created_at: { type: 'string', format: 'date-time' },
      updated_at: { type: 'string', format: 'date-time' },
      secret: { type: 'string', pattern: '^whsec_', description: 'Only when created or rolled' },
    },
  },
};

export const webhookEndpointRoutes = [
  defineRoute({
    method: 'post',
    path: '/v1/webhook_endpoints',
    operationId: 'createWebhookEndpoint',
    summary: 'Subscribe a URL to events; the response carries the signing secret, once',
    tag: 'webhooks',
    auth: ['secret_key'],
    body: CREATE_ENDPOINT_BODY,
    responses: { 200: { description: 'The endpoint, with its secret', schema: ref } },
    async handler({ services, principal, body, now }) {
      const endpoint = await services.db.transaction((trx) =>
        createEndpoint(trx, principal, body, policy(services), now),
      );
      return { body: endpoint };
    },
  }),
  defineListRoute({
    path: '/v1/webhook_endpoints',
    operationId: 'listWebhookEndpoints',
    summary: 'List webhook endpoints, newest first',
    tag: 'webhooks',
    auth: ['secret_key'],
    description: 'A page of endpoints',
    items: ref,
    list: ({ services, principal }, { offset, limit }) =>
      listEndpoints(services.db.reader, principal, offset, limit),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/webhook_endpoints/{endpointId}',
    operationId: 'getWebhookEndpoint',
    summary: 'Get a webhook endpoint',
    tag: 'webhooks',
    auth: ['secret_key'],
    params: ENDPOINT_PARAMS,
    responses: { 200: { description: 'The endpoint', schema: ref } },
    async handler({ services, principal, params }) {
      return { body: await getEndpoint(services.db.reader, principal, params.endpointId) };
    },
  }),
  defineRoute({
    method: 'patch',
    path: '/v1/webhook_endpoints/{endpointId}',
    operationId: 'updateWebhookEndpoint',
    summary: 'Change the URL, the event types, the description, or disable and re-enable',
    tag: 'webhooks',
    auth: ['secret_key'],
    params: ENDPOINT_PARAMS,
    body: UPDATE_ENDPOINT_BODY,
    responses: {
      200: { description: 'The updated endpoint', schema: ref },
      409: {
        description: "`endpoint_temporary`: a new `url` for `svc webhooks listen`'s temporary endpoint",
        schema: { $ref: '#/components/schemas/Error' },
      },
    },
    async handler({ services, principal, params, body, now }) {
      const endpoint = await services.db.transaction((trx) =>
        updateEndpoint(trx, principal, params.endpointId, body, policy(services), now),
      );
      return { body: endpoint };
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/v1/webhook_endpoints/{endpointId}',
    operationId: 'deleteWebhookEndpoint',
    summary: 'Delete a webhook endpoint; it receives nothing more',
    tag: 'webhooks',
    auth: ['secret_key'],
    params: ENDPOINT_PARAMS,
    responses: {
      200: {
        description: 'Deleted',
        schema: {
          type: 'object',
          required: ['object', 'id', 'deleted'],
          properties: {
            object: { const: 'webhook_endpoint' },
            id: { type: 'string' },
            deleted: { const: true },
          },
        },
      },
    },
    async handler({ services, principal, params, now }) {
      return {
        body: await services.db.transaction((trx) => deleteEndpoint(trx, principal, params.endpointId, now)),
      };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/webhook_endpoints/{endpointId}/roll_secret',
    operationId: 'rollWebhookEndpointSecret',
    summary: 'Replace the signing secret; the old one keeps signing beside it for the grace period',
    tag: 'webhooks',
    auth: ['secret_key'],
    params: ENDPOINT_PARAMS,
    body: ROLL_SECRET_BODY,
    responses: { 200: { description: 'The endpoint, with its new secret', schema: ref } },
    async handler({ services, principal, params, body, now }) {
      const grace = body.grace_seconds ?? services.config.webhooks.secretRollGraceSeconds;
      const endpoint = await services.db.transaction((trx) =>
        rollEndpointSecret(trx, principal, params.endpointId, grace, policy(services), now),
      );
      return { body: endpoint };
    },
  }),
];
