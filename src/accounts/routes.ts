import { defineRoute, type JsonSchema } from '../api/route.js';
import { defineListRoute } from '../api/list-route.js';
import { getAccount, listAccounts } from './accounts.js';

const ref = { $ref: '#/components/schemas/Account' };
const nullableInt = { type: ['integer', 'null'] };
const nullableTime = { type: ['string', 'null'], format: 'date-time' };

export const accountComponents: Record<string, JsonSchema> = {
  Account: {
    type: 'object',
    required: [
      'object',
      'id',
      'link_id',
      'name',
      'type',
      'currency',
      'balance',
      'status',
      'removed_from_link',
      'created_at',
      'mode',
    ],
    properties: {
      object: { const: 'account' },
      id: { type: 'string', pattern: '^acc_[0-9a-f]{16}$' },
      link_id: { type: 'string' },
      name: { type: 'string' },
      type: { enum: ['checking', 'savings', 'credit_card'] },
      currency: { type: 'string', pattern: '^[A-Z]{3}$' },
      last_4: { type: ['string', 'null'] },
      holder_name: { type: ['string', 'null'] },
      balance: {
        type: 'object',
        description: 'Minor units: CLP has no decimals, USD is in cents. `limit` for credit cards only',
        required: ['available', 'current', 'limit'],
        properties: { available: nullableInt, current: nullableInt, limit: nullableInt },
      },
      status: { enum: ['active', 'removed'] },
      removed_from_link: { type: 'boolean' },
      removed_at: nullableTime,
      refreshed_at: nullableTime,
      created_at: { type: 'string', format: 'date-time' },
      mode: { enum: ['live', 'test'] },
    },
  },
};

export const accountRoutes = [
  defineListRoute({
    path: '/v1/accounts',
    operationId: 'listAccounts',
    summary: "A link's accounts; removed ones only with include_removed=true",
    tag: 'accounts',
    auth: ['secret_key'],
    required: ['link_id'],
    filters: {
      link_id: { type: 'string', minLength: 1, pattern: '^link_[0-9a-f]{16}$' },
      include_removed: { type: 'boolean', description: 'Also list accounts the bank no longer returns' },
    },
    description: 'A page of accounts',
    items: ref,
    list: ({ services, principal, query }, { offset, limit }) =>
      listAccounts(
        services.db.reader,
        principal,
        query.link_id,
        query.include_removed === true,
        offset,
        limit,
      ),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/accounts/{accountId}',
    operationId: 'getAccount',
    summary: 'One account, with balances in minor units',
    tag: 'accounts',
    auth: ['secret_key'],
    params: {
      type: 'object',
      required: ['accountId'],
      properties: { accountId: { type: 'string', pattern: '^acc_[0-9a-f]{16}$' } },
    },
    responses: { 200: { description: 'The account', schema: ref } },
    async handler({ services, principal, params }) {
      return { body: await getAccount(services.db.reader, principal, params.accountId) };
    },
  }),
];
