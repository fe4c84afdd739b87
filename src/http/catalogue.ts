import { healthComponents, healthRoutes } from '../health/routes.js';
import { webhookComponents, webhookEndpointRoutes } from '../webhooks/routes.js';
import { deliveryComponents, deliveryRoutes } from '../webhooks/delivery-routes.js';
import { sandboxEventRoutes } from '../sandbox/routes.js';
import { institutionComponents, institutionRoutes } from '../institutions/routes.js';
import { linkComponents, linkRoutes } from '../links/routes.js';
import { backfillRoutes } from '../backfill/routes.js';
import { eventComponents, eventRoutes } from '../events/routes.js';
import { accountComponents, accountRoutes } from '../accounts/routes.js';
import { movementComponents, movementRoutes } from '../movements/routes.js';
import { incomeComponents, incomeRoutes } from '../income/routes.js';
import { refreshComponents, refreshRoutes } from '../refresh/routes.js';
import { widgetComponents, widgetTokenRoutes } from '../widget/routes.js';
import { exchangeRoutes } from '../exchange/routes.js';
import { buildOpenApi } from './openapi.js';
import { defineRoute, type AnyRoute, type JsonSchema } from '../api/route.js';

/** Every capability contributes its routes and component schemas here, and nowhere else. */
const capabilityRoutes: AnyRoute[] = [
  ...healthRoutes,
  ...institutionRoutes,
  // First of the links' paths, where the OpenAPI document has always listed it.
  ...backfillRoutes,
  ...linkRoutes,
  ...accountRoutes,
  ...movementRoutes,
  ...incomeRoutes,
  ...refreshRoutes,
  ...widgetTokenRoutes,
  ...exchangeRoutes,
  ...eventRoutes,
  ...webhookEndpointRoutes,
  ...deliveryRoutes,
  ...sandboxEventRoutes,
];
export const components: Record<string, JsonSchema> = {
  ...healthComponents,
  ...institutionComponents,
  ...linkComponents,
  ...accountComponents,
  ...movementComponents,
  ...incomeComponents,
  ...refreshComponents,
  ...widgetComponents,
  ...eventComponents,
  ...webhookComponents,
  ...deliveryComponents,
};

const openApiRoute = defineRoute({
  method: 'get',
  path: '/v1/openapi.json',
  operationId: 'getOpenApi',
  summary: 'This OpenAPI 3.1 document',
  tag: 'meta',
  auth: ['secret_key'],
  responses: { 200: { description: 'The document', schema: { type: 'object' } } },
  async handler({ services }) {
    return { body: buildOpenApi(allRoutes, components, services.config.api.baseUrl, services.config.brand) };
  },
});

export const allRoutes: AnyRoute[] = [...capabilityRoutes, openApiRoute];
