import { defineRoute, type JsonSchema } from '../api/route.js';
import { defineListRoute } from '../api/list-route.js';
import { findOwned } from '../auth/ownership.js';
import { EVENT_TYPES } from './catalogue.js';
import { listEvents, presentEvent, type EventRow } from './store.js';

const ref = { $ref: '#/components/schemas/Event' };

export const eventComponents: Record<string, JsonSchema> = {
  Event: {
    type: 'object',
    required: ['object', 'id', 'type', 'created_at', 'data', 'mode'],
    properties: {
      object: { const: 'event' },
      id: { type: 'string', pattern: '^evt_[0-9a-f]{16}$' },
      type: { type: 'string' },
      created_at: { type: 'string', format: 'date-time' },
      data: { type: 'object' },
      mode: { enum: ['live', 'test'] },
    },
  },
};

export const eventRoutes = [
  defineListRoute({
    path: '/v1/events',
    operationId: 'listEvents',
    summary: 'Events, newest first, so a receiver can recover what it missed',
    tag: 'events',
    auth: ['secret_key'],
    filters: {
      type: { enum: EVENT_TYPES },
      link_id: { type: 'string', pattern: '^link_[0-9a-f]{16}$' },
      created_after: {
        type: 'string',
        format: 'date-time',
        description: 'Only events created after this time',
      },
    },
    description: 'A page of events',
    items: ref,
    list: ({ services, principal, query }, { offset, limit }) =>
      listEvents(services.db.reader, principal, query, offset, limit),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/events/{eventId}',
    operationId: 'getEvent',
    summary: 'One event',
    tag: 'events',
    auth: ['secret_key'],
    params: {
      type: 'object',
      required: ['eventId'],
      properties: { eventId: { type: 'string', pattern: '^evt_[0-9a-f]{16}$' } },
    },
    responses: { 200: { description: 'The event', schema: ref } },
    async handler({ services, principal, params }) {
      return {
        body: presentEvent(
          await findOwned<EventRow>(services.db.reader, 'events', params.eventId, principal, 'event'),
        ),
      };
    },
  }),
];
