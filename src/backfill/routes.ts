import { defineRoute } from '../api/route.js';
import { linkParams } from '../links/routes.js';
import { requestBackfill } from './backfill.js';

/** `POST /v1/links/{linkId}/backfill`: its own room, as it queues a refresh intent (refresh/ sits above links/). */
export const backfillRoutes = [
  defineRoute({
    method: 'post',
    path: '/v1/links/{linkId}/backfill',
    operationId: 'backfillLink',
    summary:
      'Download statements for movements older than 90 days (business links of bci); returns a refresh intent to track',
    tag: 'links',
    auth: ['secret_key'],
    params: linkParams,
    body: {
      type: 'object',
      additionalProperties: false,
      required: ['months'],
      properties: {
        months: {
          type: 'integer',
          minimum: 1,
          maximum: 24,
          description: 'Months of history before the last 90 days',
        },
        force: {
          type: 'boolean',
          default: false,
          description: 'Download the period again even if it is covered',
        },
      },
    },
    responses: {
      200: {
        description: 'A refresh intent of type backfill',
        schema: { $ref: '#/components/schemas/RefreshIntent' },
      },
      409: {
        description: '`refresh_in_progress` or `link_expired`',
        schema: { $ref: '#/components/schemas/Error' },
      },
    },
    async handler({ services, principal, params, body, now }) {
      const input = { months: body.months, force: body.force ?? false };
      return {
        body: await services.db.transaction((trx) =>
          requestBackfill(trx, principal, params.linkId, input, now),
        ),
      };
    },
  }),
];
