import { defineListRoute } from '../api/list-route.js';
import type { JsonSchema } from '../api/route.js';
import { listMovements } from './movements.js';
import { movementFilters } from './schemas.js';

export const movementComponents: Record<string, JsonSchema> = {
  Movement: {
    type: 'object',
    required: [
      'object',
      'id',
      'account_id',
      'amount',
      'currency',
      'description',
      'type',
      'posted_at',
      'pending',
      'status',
      'synced_at',
      'mode',
    ],
    properties: {
      object: { const: 'movement' },
      id: { type: 'string', pattern: '^mov_[0-9a-f]{16}$' },
      account_id: { type: 'string' },
      amount: { type: 'integer', description: 'Signed minor units: negative is money out' },
      currency: { type: 'string' },
      description: { type: 'string' },
      type: {
        enum: ['transfer', 'card_purchase', 'deposit', 'withdrawal', 'fee', 'interest', 'salary', 'other'],
      },
      reference_id: { type: ['string', 'null'] },
      counterparty: {
        type: ['object', 'null'],
        properties: {
          name: { type: 'string' },
          rut: { type: ['string', 'null'] },
          bank_id: { type: ['string', 'null'] },
          account_last_4: { type: ['string', 'null'] },
        },
      },
      posted_at: { type: 'string', format: 'date-time' },
      transaction_date: { type: ['string', 'null'] },
      pending: { type: 'boolean' },
      status: { enum: ['normal', 'duplicated', 'reversed'] },
      canonical_id: {
        type: ['string', 'null'],
        description: 'On a duplicated row, the movement that replaces it',
      },
      synced_at: {
        type: 'string',
        format: 'date-time',
        description: 'When the service stored this version of the row: the cursor of synced_since',
      },
      mode: { enum: ['live', 'test'] },
    },
  },
};

export const movementRoutes = [
  defineListRoute({
    path: '/v1/accounts/{accountId}/movements',
    operationId: 'listMovements',
    summary: "An account's movements: a plain array, paginated in the headers",
    tag: 'movements',
    auth: ['secret_key'],
    params: {
      type: 'object',
      required: ['accountId'],
      properties: { accountId: { type: 'string', pattern: '^acc_[0-9a-f]{16}$' } },
    },
    filters: movementFilters,
    description: 'A page of movements',
    items: { $ref: '#/components/schemas/Movement' },
    list: ({ services, principal, params, query }, window) =>
      listMovements(services.db.reader, principal, params.accountId, query, window),
  }),
];
