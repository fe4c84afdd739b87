import { defineRoute, type JsonSchema } from '../api/route.js';
import { defineListRoute } from '../api/list-route.js';
import { DELIVERY_STATUSES, getDelivery, listDeliveries, presentDelivery, redeliver } from './deliveries.js';

const ref = { $ref: '#/components/schemas/WebhookDelivery' };
const nullableTime = { type: ['string', 'null'], format: 'date-time' };
const deliveryParams = {
  type: 'object',
  required: ['deliveryId'],
  properties: { deliveryId: { type: 'string', pattern: '^wd_[0-9a-f]{16}$' } },
} as const;

export const deliveryComponents: Record<string, JsonSchema> = {
  WebhookDelivery: {
    type: 'object',
    description: 'One attempt series of an event to an endpoint',
    required: [
      'object',
      'id',
      'event_id',
      'event_type',
      'endpoint_id',
      'status',
      'attempts',
      'next_attempt_at',
      'last_attempt_at',
      'last_response_status',
      'last_error',
      'created_at',
      'mode',
    ],
    properties: {
      object: { const: 'webhook_delivery' },
      id: { type: 'string', pattern: '^wd_[0-9a-f]{16}$' },
      event_id: { type: 'string', pattern: '^evt_[0-9a-f]{16}$' },
      event_type: { type: 'string' },
      endpoint_id: { type: 'string', pattern: '^we_[0-9a-f]{16}$' },
      status: { enum: DELIVERY_STATUSES },
      attempts: { type: 'integer', minimum: 0, description: 'Attempts made so far in this series' },
      next_attempt_at: {
        ...nullableTime,
        description:
          'When the next attempt is due; null once the series ended, or while the endpoint is disabled',
      },
      last_attempt_at: nullableTime,
      last_response_status: {
        type: ['integer', 'null'],
        description:
          'HTTP status of the last attempt; null when no response came (timeout, refused connection)',
      },
      last_error: {
        type: ['string', 'null'],
        description: 'Why the last attempt failed; null after a success',
      },
      created_at: { type: 'string', format: 'date-time' },
      mode: { enum: ['live', 'test'] },
      attempt_history: {
        type: 'array',
        description: 'Every attempt, oldest first; only when one delivery is read',
        items: { $ref: '#/components/schemas/WebhookAttempt' },
      },
    },
  },
  WebhookAttempt: {
    type: 'object',
    required: ['object', 'number', 'started_at', 'duration_ms', 'status_code', 'error', 'response_excerpt'],
    properties: {
      object: { const: 'webhook_attempt' },
      number: { type: 'integer', minimum: 1 },
      started_at: { type: 'string', format: 'date-time' },
      duration_ms: { type: 'integer', minimum: 0 },
      status_code: { type: ['integer', 'null'] },
      error: { type: ['string', 'null'] },
      response_excerpt: {
        type: ['string', 'null'],
        description: 'The start of the response body (2 KB by default)',
      },
    },
  },
};

export const deliveryRoutes = [
  defineListRoute({
    path: '/v1/webhook_deliveries',
    operationId: 'listWebhookDeliveries',
    summary: 'Delivery history, newest first: one row per attempt series of an event to an endpoint',
    tag: 'webhooks',
    auth: ['secret_key'],
    filters: {
      event_id: { type: 'string', pattern: '^evt_[0-9a-f]{16}$' },
      endpoint_id: { type: 'string', pattern: '^we_[0-9a-f]{16}$' },
      status: { enum: DELIVERY_STATUSES },
    },
    description: 'A page of deliveries',
    items: ref,
    async list({ services, principal, query }, { offset, limit }) {
      const { rows, total } = await listDeliveries(
        services.db.reader,
        {
          orgId: principal.orgId,
          mode: principal.mode,
          eventId: query.event_id,
          endpointId: query.endpoint_id,
          status: query.status,
        },
        offset,
        limit,
      );
      return { data: rows.map(presentDelivery), total };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/webhook_deliveries/{deliveryId}',
    operationId: 'getWebhookDelivery',
    summary: 'One delivery with every attempt (status code, duration, error, start of the response)',
    tag: 'webhooks',
    auth: ['secret_key'],
    params: deliveryParams,
    responses: {
      200: {
        description: 'The delivery and its attempts',
        schema: { allOf: [ref, { type: 'object', required: ['attempt_history'] }] },
      },
    },
    async handler({ services, principal, params }) {
      return { body: await getDelivery(services.db.reader, principal, params.deliveryId) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/webhook_deliveries/{deliveryId}/redeliver',
    operationId: 'redeliverWebhookDelivery',
    summary:
      'Send the event to the endpoint again: a new delivery with a new attempt series; the original stays as it was',
    tag: 'webhooks',
    auth: ['secret_key'],
    params: deliveryParams,
    responses: {
      200: { description: 'The new delivery, due now', schema: ref },
      409: {
        description: '`endpoint_disabled`: the endpoint is disabled, so nothing would be sent',
        schema: { $ref: '#/components/schemas/Error' },
      },
    },
    async handler({ services, principal, params, now }) {
      const delivery = await services.db.transaction((trx) =>
        redeliver(trx, principal, params.deliveryId, now),
      );
      return { body: delivery };
    },
  }),
];
