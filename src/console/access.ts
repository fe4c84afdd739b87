import type { Mode } from '../keys/key-format.js';
import type { ConsoleUserRow } from './users.js';

/*
 * Who may do what in the console. Reading is every role's; `operate` (pause, resume and refresh a link,
 * redeliver) is support's too; `manage` (keys, endpoints, deleting a link, firing test events) is an
 * operator's or an organisation admin's. An organisation the user does not belong to does not exist for
 * them: its pages answer 404, as the API's do for another tenant's resources.
 */

export type ConsoleAction = 'read' | 'operate' | 'manage';

export interface ConsoleScope {
  orgId: string;
  orgName: string;
  mode: Mode;
}

/** Whether the user sees this organisation at all: operators and support for all see every one. */
export function seesOrganisation(user: Pick<ConsoleUserRow, 'org_id'>, orgId: string): boolean {
  return user.org_id === null || user.org_id === orgId;
}

export function may(user: Pick<ConsoleUserRow, 'role'>, action: ConsoleAction): boolean {
  if (action === 'manage') return user.role === 'operator' || user.role === 'admin';
  return true;
}

/** The console's base path of a scope: `/console/o/{org}/{mode}`. */
export function scopePath(scope: Pick<ConsoleScope, 'orgId' | 'mode'>, mode: Mode = scope.mode): string {
  return `/console/o/${scope.orgId}/${mode}`;
}
