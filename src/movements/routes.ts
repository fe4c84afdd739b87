import { defineRoute, type JsonSchema } from '../api/route.js';
import { pageQueryProperties, paginationHeaders } from '../api/pagination.js';
import { listMovements, type MovementQuery } from './movements.js';

const time = {
  type: 'string',
  pattern: '^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,6})?)?(Z|[+-]\\d{2}:\\d{2}))?$',
};

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
  defineRoute<MovementQuery, undefined, { accountId: string }>({
    method: 'get',
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
    query: {
      type: 'object',
      additionalProperties: false,
      properties: {
        ...pageQueryProperties,
        since: { ...time, description: 'posted_at at or after this date or time (it may be retroactive)' },
        until: {
          ...time,
          description: 'posted_at at or before this date or time (a date covers its whole day)',
        },
        synced_since: {
          ...time,
          description:
            'Forward cursor: rows stored after this time, oldest first. Save the largest synced_at you read as the next cursor',
        },
        confirmed_only: {
          type: 'boolean',
          default: true,
          description: 'false also lists pending rows (pending=true)',
        },
        include_removals: {
          type: 'boolean',
          description:
            'With synced_since: also rows removed by deduplication or reversal, with their status and canonical_id',
        },
      },
    },
    responses: {
      200: {
        description: 'A page of movements',
        schema: { type: 'array', items: { $ref: '#/components/schemas/Movement' } },
        headers: ['pagination'],
      },
    },
    async handler({ services, principal, params, query, ctx }) {
      const { data, total } = await listMovements(services.db.reader, principal, params.accountId, query);
      return {
        body: data,
        headers: paginationHeaders(services.config.api.baseUrl, ctx.path, ctx.query, query, total),
      };
    },
  }),
];
