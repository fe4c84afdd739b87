import type { FromSchema } from 'json-schema-to-ts';

/**
 * The banks' limits in the configuration: `banks.budget` (every consent bank's, by default the CMF draft's 10
 * requests a second and 60 a minute) and `banks.budgets.<bank>` (one bank's own, in config.json). The bank
 * side owns them, as it owns the connectors' settings (connector-settings.ts); config/schema.ts composes them.
 */
export const DRAFT_PER_SECOND = 10;
export const DRAFT_PER_MINUTE = 60;

const perSecond = {
  type: 'integer',
  minimum: 1,
  description:
    "Calls a second the appliance makes to one consent bank, all scheduler processes together (the CMF's draft: 10)",
} as const;
const perMinute = {
  type: 'integer',
  minimum: 1,
  description:
    "Calls a minute the appliance makes to one consent bank, all scheduler processes together (the CMF's draft: 60)",
} as const;

export const budgetDefaultsSchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    perSecond,
    perMinute,
    arrivalMarginMs: {
      type: 'integer',
      minimum: 0,
      maximum: 900,
      description:
        'No call to a consent bank starts in the last this-many ms of a second, so it reaches the bank within the second it was counted in (docs/open-finance.md, "Bank limits")',
    },
    scheduledShare: {
      type: 'number',
      exclusiveMinimum: 0,
      maximum: 1,
      description:
        'Share of each window scheduled syncs may use; on-demand refreshes may use the whole, so they go first (docs/open-finance.md, "Bank limits")',
    },
    consentStartShare: {
      type: 'number',
      exclusiveMinimum: 0,
      maximum: 1,
      description:
        'Share of a bank\'s per-minute calls the widgets\' consent starts may take, all organisations together (docs/open-finance.md, "Bank limits")',
    },
  },
} as const;

/** One bank's own limits, `banks.budgets.<bank>`: either may be left to `banks.budget`. */
export const bankBudgetSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { perSecond, perMinute },
} as const;

export type BudgetDefaults = Required<FromSchema<typeof budgetDefaultsSchema>>;
export type BankBudgetSettings = FromSchema<typeof bankBudgetSchema>;
