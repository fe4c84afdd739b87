import type { Knex } from 'knex';
import type { Context } from 'koa';
import type { Principal, CredentialKind } from '../auth/principal.js';
import type { RateGroup } from '../config/defaults.js';
import type { AppServices } from './services.js';

export type HttpMethod = 'get' | 'post' | 'patch' | 'delete';
export type JsonSchema = Record<string, unknown>;

export interface RouteResult {
  status?: number;
  body: unknown;
  headers?: Record<string, string>;
}

export interface RouteInput<Q, B, P> {
  query: Q;
  body: B;
  params: P;
  /** Present on every authenticated route. */
  principal: Principal;
  services: AppServices;
  ctx: Context;
  now: number;
}

/**
 * One declaration per endpoint: the router mounts it, the OpenAPI document describes it and the validator
 * compiles its schemas, so the three cannot drift apart.
 */
export interface Route<Q = Record<string, never>, B = undefined, P = Record<string, string>> {
  method: HttpMethod;
  /** OpenAPI template, e.g. `/v1/links/{linkId}`. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  /** Credential kinds accepted; `none` for public routes such as /health. */
  auth: CredentialKind[] | 'none';
  /**
   * Callable from web pages of `widget.allowedOrigins` (CORS: preflights answered, the answer readable),
   * except with a secret key (cors.ts).
   */
  browser?: boolean;
  /** Defaults to the spec's group for the method and path. */
  rateGroup?: RateGroup;
  params?: JsonSchema;
  query?: JsonSchema;
  body?: JsonSchema;
  /** Response schemas by status; `$ref`s point into the document's components. */
  responses: Record<number, { description: string; schema?: JsonSchema; headers?: string[] }>;
  handler(input: RouteInput<Q, B, P>): Promise<RouteResult>;
}

// Routes of different shapes live in one list; their handlers are typed where they are declared.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyRoute = Route<any, any, any>;

export function defineRoute<Q = Record<string, never>, B = undefined, P = Record<string, string>>(
  route: Route<Q, B, P>,
): AnyRoute {
  return route as AnyRoute;
}

/** `/v1/links/{linkId}` → `/v1/links/:linkId` for the router. */
export function koaPath(path: string): string {
  return path.replace(/\{(\w+)\}/g, ':$1');
}

export type Transaction = Knex.Transaction;
