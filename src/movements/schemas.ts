import type { FromSchema } from 'json-schema-to-ts';

const time = {
  type: 'string',
  pattern: '^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,6})?)?(Z|[+-]\\d{2}:\\d{2}))?$',
} as const;

/** The movement list's filters: the route's query (with `page` and `per_page`) and the service's input. */
export const movementFilters = {
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
} as const;

export type MovementQuery = FromSchema<{
  type: 'object';
  additionalProperties: false;
  properties: typeof movementFilters;
}>;
