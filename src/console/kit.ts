import type { Context } from 'koa';
import type { AppServices } from '../api/services.js';
import type { Html } from '../html/html.js';
import type { Locale } from '../html/locale.js';
import type { ConsoleAction, ConsoleScope } from './access.js';
import type { ConsoleMessageKey, Words } from './messages.js';
import type { PageContext } from './layout.js';
import type { HashLane } from './passwords.js';
import type { SessionClaims } from './session-token.js';
import type { ConsoleUserRow } from './users.js';

/*
 * What the console's router (http.ts) hands each page module (keys-pages.ts, …): the request's console state
 * and the kit of answers every page uses. Types only, so that the pages need not import the router that
 * registers them.
 */

export interface ConsoleState {
  user: ConsoleUserRow;
  claims: SessionClaims;
  locale: Locale;
  /** The organisation and mode of a page under /console/o/{org}/{mode}. */
  scope?: ConsoleScope;
  /** The POST's fields, read once by the CSRF check. */
  form: Record<string, string>;
}

/** What each page module (keys-pages.ts, …) renders and answers with. */
export interface ConsoleKit {
  services: AppServices;
  send(ctx: Context, status: number, page: Html): void;
  /** The page context of a signed-in page; `section` is the page's path inside its scope (for the mode switch). */
  pageContext(ctx: Context, section?: string): PageContext;
  refuse(ctx: Context, status: number, key: ConsoleMessageKey): void;
  /** The request's console state; typed with its scope, which only an organisation's page (`under: 'scope'`) has. */
  state(ctx: Context): ConsoleState & { scope: ConsoleScope };
  /**
   * A new session for `user` (after a change that moved their session epoch on), as this response's cookie;
   * it ends when the current one would have (a change of credentials extends no session).
   */
  startSession(ctx: Context, user: ConsoleUserRow): Promise<void>;
  /** The signed-in user's translator. */
  words(ctx: Context): Words;
  /**
   * A check of the signed-in user's password (and code), counted as a sign-in attempt first: the user as the
   * check leaves them, null for a wrong password or code, 'throttled' (with Retry-After) over the budget.
   * `check` hashes in the lane it is given (passwords.ts: `known` from a browser known to the user).
   */
  checkCredentials(
    ctx: Context,
    check: (lane: HashLane) => Promise<ConsoleUserRow | null>,
  ): Promise<ConsoleUserRow | null | 'throttled'>;
}

/**
 * One route of the console's signed-in pages: its method, where it stands (`under`) and its path there, what
 * the user must be allowed (access.ts; a page is `read`) and its one handler. The router (http.ts) resolves
 * an organisation's scope first (404 for one the user does not see), then `find` (what the URL names must
 * exist for this user: another scope's resource, or a page that is not theirs, is a 404 whatever the role),
 * then checks `needs` (403), then calls `handle`.
 */
export interface ConsoleRoute {
  method: 'get' | 'post';
  /**
   * `scope` (the default): an organisation's section, under `/console/o/{org}/{mode}`; `console`: the
   * console's own pages under `/console` (organisations, users, the account), with no scope.
   */
  under?: 'scope' | 'console';
  /** Below `under`: `/webhooks/:endpoint/roll`, `/users/:user`; the overview is the scope's own address, ''. */
  path: string;
  needs: ConsoleAction;
  find?: (ctx: Context, kit: ConsoleKit) => Promise<unknown>;
  handle(ctx: Context, kit: ConsoleKit): Promise<void>;
}
