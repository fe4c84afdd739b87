import type { FromSchema } from 'json-schema-to-ts';
import type { Knex } from 'knex';
import { defineRoute, type JsonSchema } from '../api/route.js';
import type { Principal } from '../auth/principal.js';
import { findOwned } from '../auth/ownership.js';
import { findInstitution, institutionsOf, offers, type Institution } from '../banks/institutions.js';
import { errors } from '../errors/api-error.js';
import { accountsOfLink } from '../accounts/store.js';
import type { LinkRow } from '../links/store.js';
import { firstPostedAt, movementsForIncome } from '../movements/store.js';
import { INCOME_THRESHOLDS, incomeSnapshot, incomeWindow, type IncomeMovement } from './income.js';

const DAY_MS = 86_400_000;

const incomeQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    months: {
      type: 'integer',
      minimum: 1,
      maximum: 24,
      default: 6,
      description: 'Complete calendar months before the current one',
    },
    currency: {
      type: 'string',
      pattern: '^[A-Z]{3}$',
      default: 'CLP',
      description: 'ISO 4217 code, upper case; only movements in it count',
    },
  },
} as const;

export type IncomeQuery = FromSchema<typeof incomeQuery>;

/**
 * The income snapshot of a link: reads the link's stored movements (three reads, no write, no sync) and
 * hands them to the pure algorithm in income.ts.
 */
export async function getIncomeSnapshot(
  db: Knex,
  principal: Principal,
  linkId: string,
  query: IncomeQuery,
  now: number,
  institutions?: readonly Institution[],
) {
  const link = await findOwned<LinkRow>(db, 'links', linkId, principal, 'link');
  const institution = findInstitution(link.bank_id, institutions);
  if (!institution || !offers(institution, 'income', link.holder_type)) {
    throw errors.badRequest(
      'product_unavailable',
      `${institution?.name ?? link.bank_id} does not offer the income product to ${link.holder_type} holders (see GET /v1/institutions).`,
    );
  }
  const window = incomeWindow(now, query.months);
  // Outflows up to `internalTransferDays` around the period still pair with an inflow inside it.
  const slack = INCOME_THRESHOLDS.internalTransferDays * DAY_MS;
  const [accounts, rows, historyStart] = await Promise.all([
    accountsOfLink(db, link.id),
    movementsForIncome(db, link.id, query.currency, window.detectionFrom - slack, window.to + slack),
    firstPostedAt(db, link.id),
  ]);
  const accountType = new Map(accounts.map((account) => [account.id, account.type]));
  const movements: IncomeMovement[] = rows.map((row) => {
    const party = row.counterparty
      ? (JSON.parse(row.counterparty) as { name?: string; rut?: string | null })
      : null;
    return {
      id: row.id,
      accountId: row.account_id,
      accountType: accountType.get(row.account_id) ?? 'checking',
      amount: Number(row.amount),
      currency: row.currency,
      description: row.description,
      type: row.type,
      referenceId: row.reference_id,
      counterparty: party?.name ? { name: party.name, rut: party.rut ?? null } : null,
      postedAt: Number(row.posted_at),
      pending: Boolean(row.pending),
      status: row.status,
    };
  });
  const ownNames = [link.holder_name, ...accounts.map((account) => account.holder_name)].filter(
    (name): name is string => Boolean(name),
  );
  const snapshot = incomeSnapshot({
    movements,
    currency: query.currency,
    months: query.months,
    now,
    ownNames,
    historyStart,
  });
  return {
    object: 'income_snapshot' as const,
    link_id: link.id,
    mode: link.mode,
    currency: query.currency,
    months: query.months,
    ...snapshot,
  };
}

const date = { type: 'string', format: 'date' };
const money = { type: 'integer', description: 'Integer minor units of the currency' };

export const incomeComponents: Record<string, JsonSchema> = {
  IncomeSource: {
    type: 'object',
    additionalProperties: false,
    required: [
      'source',
      'source_rut',
      'average_amount',
      'frequency',
      'regularity',
      'last_seen',
      'occurrences',
    ],
    properties: {
      source: { type: 'string', description: "The payer's name, or the normalised description" },
      source_rut: { type: ['string', 'null'], description: "The payer's RUT when the bank gives it" },
      average_amount: { ...money, description: 'Mean payment, integer minor units' },
      frequency: { enum: ['weekly', 'biweekly', 'monthly', 'irregular'] },
      regularity: {
        type: 'number',
        minimum: 0,
        maximum: 1,
        description: 'How reliably it arrived on schedule with a stable amount (docs/income.md)',
      },
      last_seen: { ...date, description: 'UTC day of the latest payment' },
      occurrences: { type: 'integer', minimum: 1, description: 'Paydays (payments of one day summed)' },
    },
  },
  IncomeSnapshot: {
    type: 'object',
    additionalProperties: false,
    required: [
      'object',
      'link_id',
      'mode',
      'currency',
      'months',
      'window',
      'main_income',
      'other_recurring_income',
      'monthly_totals',
      'averages',
    ],
    properties: {
      object: { const: 'income_snapshot' },
      link_id: { type: 'string', pattern: '^link_[0-9a-f]{16}$' },
      mode: { enum: ['live', 'test'] },
      currency: { type: 'string', pattern: '^[A-Z]{3}$' },
      months: { type: 'integer', minimum: 1, maximum: 24 },
      window: {
        type: 'object',
        additionalProperties: false,
        required: ['from', 'to'],
        description: 'The complete calendar months covered (UTC); the current month is not included',
        properties: { from: date, to: date },
      },
      main_income: {
        oneOf: [{ $ref: '#/components/schemas/IncomeSource' }, { type: 'null' }],
        description: 'The current recurring source with the largest total; null when there is none',
      },
      other_recurring_income: { type: 'array', items: { $ref: '#/components/schemas/IncomeSource' } },
      monthly_totals: {
        type: 'array',
        items: {
          type: 'object',
          additionalProperties: false,
          required: ['month', 'income', 'recurring_income', 'covered'],
          properties: {
            month: { type: 'string', pattern: '^\\d{4}-\\d{2}$' },
            income: { ...money, description: 'Inflows that count as income' },
            recurring_income: { ...money, description: 'The part from recurring sources' },
            covered: {
              type: 'boolean',
              description:
                "Whether the link's stored history covers the month; only covered months are averaged",
            },
          },
        },
      },
      averages: {
        type: 'object',
        additionalProperties: false,
        required: ['monthly_income', 'monthly_recurring_income', 'months_counted'],
        properties: {
          monthly_income: money,
          monthly_recurring_income: money,
          months_counted: { type: 'integer', minimum: 0, description: 'Covered months averaged over' },
        },
      },
    },
  },
};

export const incomeRoutes = [
  defineRoute({
    method: 'get',
    path: '/v1/links/{linkId}/income',
    operationId: 'getIncomeSnapshot',
    summary: "A link's income snapshot: main recurring income, regularity, monthly totals. Read-only",
    tag: 'income',
    auth: ['secret_key'],
    params: {
      type: 'object',
      required: ['linkId'],
      properties: { linkId: { type: 'string', pattern: '^link_[0-9a-f]{16}$' } },
    },
    query: incomeQuery,
    responses: {
      200: { description: 'The income snapshot', schema: { $ref: '#/components/schemas/IncomeSnapshot' } },
    },
    async handler({ services, principal, params, query, now }) {
      return {
        body: await getIncomeSnapshot(
          services.db.reader,
          principal,
          params.linkId,
          query,
          now,
          institutionsOf(services.config),
        ),
      };
    },
  }),
];
