import { defineRoute } from '../api/route.js';

export const healthRoutes = [
  defineRoute({
    method: 'get',
    path: '/health',
    operationId: 'getHealth',
    summary: 'Liveness probe: ok when the database answers',
    tag: 'health',
    auth: 'none',
    responses: {
      200: { description: 'The database answers', schema: { $ref: '#/components/schemas/Health' } },
      503: { description: 'The database does not answer', schema: { $ref: '#/components/schemas/Health' } },
    },
    async handler({ services }) {
      try {
        await services.db.ping(2000);
        return { body: { status: 'ok' } };
      } catch {
        return { status: 503, body: { status: 'unavailable' }, headers: { 'Retry-After': '5' } };
      }
    },
  }),
];

export const healthComponents = {
  Health: { type: 'object', required: ['status'], properties: { status: { enum: ['ok', 'unavailable'] } } },
};
