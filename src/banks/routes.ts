import { defineListRoute } from '../api/list-route.js';
import type { JsonSchema } from '../api/route.js';
import { bankHealth } from './health.js';
import { INSTITUTIONS, PRODUCTS, offers } from './institutions.js';

export const institutionComponents: Record<string, JsonSchema> = {
  Institution: {
    type: 'object',
    required: [
      'object',
      'id',
      'name',
      'country',
      'products',
      'holder_types',
      'availability',
      'status',
      'mode',
    ],
    properties: {
      object: { const: 'institution' },
      id: { type: 'string' },
      name: { type: 'string' },
      country: { type: 'string' },
      products: { type: 'array', items: { enum: PRODUCTS } },
      holder_types: { type: 'array', items: { enum: ['individual', 'business'] } },
      availability: {
        type: 'array',
        items: {
          type: 'object',
          required: ['product', 'holder_type', 'available'],
          properties: {
            product: { enum: PRODUCTS },
            holder_type: { enum: ['individual', 'business'] },
            available: { type: 'boolean' },
          },
        },
      },
      status: {
        enum: ['up', 'degraded', 'down'],
        description: 'From the outcomes of the last hour of syncs with this bank',
      },
      mode: { enum: ['live', 'test'] },
    },
  },
};

export const institutionRoutes = [
  defineListRoute({
    path: '/v1/institutions',
    operationId: 'listInstitutions',
    summary: 'The supported banks, their products and holder types, and their health',
    tag: 'institutions',
    auth: ['secret_key'],
    filters: {
      product: { enum: PRODUCTS },
      holder_type: { enum: ['individual', 'business'] },
      include_unavailable: { type: 'boolean', description: 'Also list combinations not available yet' },
    },
    description: 'Institutions',
    items: { $ref: '#/components/schemas/Institution' },
    async list({ services, principal, query, now }, { offset, limit }) {
      const health = await bankHealth(services.db.reader, principal.mode, now);
      const all = INSTITUTIONS.map((institution) => {
        const hasConnector = services.connectors(institution.id, principal.mode) !== null;
        const availability = PRODUCTS.flatMap((product) =>
          (['individual', 'business'] as const).map((holder_type) => ({
            product,
            holder_type,
            available: hasConnector && offers(institution, product, holder_type),
          })),
        ).filter(
          (c) =>
            (query.product === undefined || c.product === query.product) &&
            (query.holder_type === undefined || c.holder_type === query.holder_type) &&
            (c.available || query.include_unavailable === true),
        );
        return {
          object: 'institution' as const,
          id: institution.id,
          name: institution.name,
          country: institution.country,
          products: [...new Set(availability.map((c) => c.product))],
          holder_types: [...new Set(availability.map((c) => c.holder_type))],
          availability,
          status: health.get(institution.id) ?? 'up',
          mode: principal.mode,
        };
      }).filter((institution) => institution.availability.length > 0);
      return { data: all.slice(offset, offset + limit), total: all.length };
    },
  }),
];
