import type { Knex } from 'knex';
import { toIso } from '../clock/clock.js';
import type { Principal } from '../auth/principal.js';
import { findOwned } from '../auth/ownership.js';
import { fetchPage, type Order } from '../db/paging.js';
import type { AccountRow } from './store.js';

export function presentAccount(row: AccountRow) {
  return {
    object: 'account' as const,
    id: row.id,
    link_id: row.link_id,
    name: row.name,
    type: row.type,
    currency: row.currency,
    last_4: row.last_4,
    holder_name: row.holder_name,
    balance: { available: row.balance_available, current: row.balance_current, limit: row.balance_limit },
    status: row.status,
    removed_from_link: Boolean(row.removed_from_link),
    removed_at: toIso(row.removed_at),
    refreshed_at: toIso(row.refreshed_at),
    created_at: toIso(row.created_at)!,
    mode: row.mode,
  };
}

export async function listAccounts(
  db: Knex,
  principal: Principal,
  linkId: string,
  includeRemoved: boolean,
  offset: number,
  limit: number,
) {
  await findOwned(db, 'links', linkId, principal, 'link');
  const scoped = () => {
    const query = db<AccountRow>('accounts').where({
      link_id: linkId,
      org_id: principal.orgId,
      mode: principal.mode,
    });
    if (!includeRemoved) query.where('removed_from_link', false);
    return query;
  };
  const oldestFirst: Order = [
    ['created_at', 'asc'],
    ['id', 'asc'],
  ];
  const { rows, total } = await fetchPage<AccountRow>(scoped, oldestFirst, offset, limit);
  return { data: rows.map(presentAccount), total };
}

export async function getAccount(db: Knex, principal: Principal, id: string) {
  return presentAccount(await findOwned<AccountRow>(db, 'accounts', id, principal, 'account'));
}
