import type { FromSchema, JSONSchema } from 'json-schema-to-ts';
import type { Knex } from 'knex';
import type { Context } from 'koa';
import type { Principal, CredentialKind } from '../auth/principal.js';
import type { RateGroup } from '../config/defaults.js';
import type { AppServices } from './services.js';

export type HttpMethod = 'get' | 'post' | 'patch' | 'delete';
export type JsonSchema = Record<string, unknown>;

/**
 * What a request part holds once its schema validated it: the schema's own type (`FromSchema`, as Unleash
 * does), with defaulted properties present since the validator fills them in (ajv's `useDefaults`). A part
 * without a schema is `Otherwise`. Schemas must be literal (`as const`, or written inline in `defineRoute`)
 * for their type to be read.
 */
export type Validated<S, Otherwise> = S extends JSONSchema ? FromSchema<S> : Otherwise;

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
 * One declaration per endpoint: the router mounts it, the OpenAPI document describes it, the validator
 * compiles its schemas and the compiler types its handler from them, so the four cannot drift apart.
 */
export interface Route<Q = unknown, B = unknown, P = unknown> {
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

/** Routes of different shapes in one list: the router and the document read only their schemas. */
export type AnyRoute = Route;

/** A route as written: its schemas, and a handler whose input types are read from them. */
export interface RouteDeclaration<QS, BS, PS> extends Omit<Route, 'params' | 'query' | 'body' | 'handler'> {
  params?: PS;
  query?: QS;
  body?: BS;
  handler(
    input: RouteInput<
      Validated<QS, Record<string, never>>,
      Validated<BS, undefined>,
      Validated<PS, Record<string, string>>
    >,
  ): Promise<RouteResult>;
}

/** A route whose handler's input types are read from its schemas. */
export function defineRoute<
  const QS extends JSONSchema | undefined = undefined,
  const BS extends JSONSchema | undefined = undefined,
  const PS extends JSONSchema | undefined = undefined,
>(route: RouteDeclaration<QS, BS, PS>): AnyRoute;
/** A route typed by hand, such as a test's ad-hoc route: nothing checks the types against the schemas. */
export function defineRoute<Q, B = undefined, P = Record<string, string>>(route: Route<Q, B, P>): AnyRoute;
export function defineRoute(route: unknown): AnyRoute {
  return route as AnyRoute;
}

export type Transaction = Knex.Transaction;
