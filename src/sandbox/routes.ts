import { defineRoute } from '../api/route.js';
import { fireSandboxEvent } from './sandbox-events.js';
import { FIRE_EVENT_BODY } from '../webhooks/schemas.js';

export const sandboxEventRoutes = [
  defineRoute({
    method: 'post',
    path: '/v1/sandbox/events/fire',
    operationId: 'fireSandboxEvent',
    summary:
      'Emit a realistic event of any catalogue type about a test link, to the test-mode endpoints only; the link does not change and no sync runs',
    tag: 'webhooks',
    auth: ['secret_key'],
    body: FIRE_EVENT_BODY,
    responses: {
      200: {
        description: 'The event, stored and queued for every subscribed test-mode endpoint',
        schema: { $ref: '#/components/schemas/Event' },
      },
    },
    async handler({ services, principal, body, now }) {
      const event = await services.db.transaction((trx) =>
        fireSandboxEvent(
          trx,
          principal,
          body,
          {
            syncIntervalMinutes: services.config.scheduler.syncIntervalMinutes,
            consentExpiryWarningDays: services.config.links.consentExpiryWarningDays,
          },
          now,
        ),
      );
      return { body: event };
    },
  }),
];
