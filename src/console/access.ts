import type { Principal } from '../auth/principal.js';
import type { Mode } from '../keys/key-format.js';
import type { ConsoleUserRow } from './users.js';

/*
 * Who may do what in the console. Reading is every role's; `operate` (pause, resume and refresh a link,
 * redeliver) is support's too; `manage` (keys, endpoints, deleting a link, firing test events) is an
 * operator's or an organisation admin's; `govern` (an organisation's rate-limit ceilings, within which its
 * admins set their keys' limits) is the operator's alone. An organisation the user does not belong to does not exist for
 * them: its pages answer 404, as the API's do for another tenant's resources.
 */

export type ConsoleAction = 'read' | 'operate' | 'manage' | 'govern';

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
  if (action === 'govern') return user.role === 'operator';
  if (action === 'manage') return user.role === 'operator' || user.role === 'admin';
  return true;
}

/** The console's base path of a scope: `/console/o/{org}/{mode}`. */
export function scopePath(scope: Pick<ConsoleScope, 'orgId' | 'mode'>, mode: Mode = scope.mode): string {
  return `/console/o/${scope.orgId}/${mode}`;
}

/**
 * The principal the console acts as in a scope, for the services the API uses (they check that a resource
 * is the organisation's, in the mode). Never a credential: nothing authenticates with it.
 */
export function consolePrincipal(scope: ConsoleScope, user: Pick<ConsoleUserRow, 'id'>): Principal {
  return {
    kind: 'secret_key',
    orgId: scope.orgId,
    mode: scope.mode,
    credentialId: `console:${user.id}`,
    actor: `console:${user.id}`,
    bucketId: `console:${user.id}`,
    limits: {} as Principal['limits'],
  };
}
