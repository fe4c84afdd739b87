import { Flags } from '@oclif/core';
import type { Knex } from 'knex';
import { errors } from '../errors/api-error.js';

export const rateLimitFlag = Flags.string({
  description: 'raise a group limit for this key: group=perMinute[:burst], e.g. read=1000 (repeatable)',
  multiple: true,
});

/** `--org`, or the only organisation there is. */
export async function resolveOrg(db: Knex, flag: string | undefined): Promise<string> {
  if (flag) return flag;
  const orgs: { id: string }[] = await db('organisations').select('id').limit(2);
  if (orgs.length === 1) return orgs[0]!.id;
  throw errors.missingParameter(
    'org',
    orgs.length === 0
      ? 'No organisation exists yet; run `svc install`.'
      : 'Several organisations exist; name one with --org.',
  );
}
