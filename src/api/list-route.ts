import type { JSONSchema } from 'json-schema-to-ts';
import type { PageWindow } from '../db/paging.js';
import { pageQueryProperties, pageWindow, paginationHeaders, type PageQuery } from './pagination.js';
import type { AnyRoute, JsonSchema, RouteDeclaration, RouteInput, Validated } from './route.js';

/** The filters of a list, as validated: each optional here; `ListQuery` marks the required ones. */
type Filters<FS> = Validated<{ type: 'object'; additionalProperties: false; properties: FS }, never>;

/** A list's query: its filters, those named in `R` present, and the spec's `page` and `per_page`. */
export type ListQuery<FS, R extends readonly string[]> = Omit<Filters<FS>, R[number]> &
  Required<Pick<Filters<FS>, R[number] & keyof Filters<FS>>> &
  PageQuery;

/** A list endpoint as written: what it filters on and how it finds a page; the frame does the rest. */
export interface ListDeclaration<FS, R extends readonly string[], PS> extends Omit<
  RouteDeclaration<undefined, undefined, PS>,
  'method' | 'query' | 'body' | 'responses' | 'handler'
> {
  /** Query parameters besides `page` and `per_page`, in the order the document lists them. */
  filters?: FS;
  /** Filters that must be given. */
  required?: R;
  /** The 200 answer: what it holds, and the schema of one element. */
  description: string;
  items: JsonSchema;
  /**
   * One page of the list, and how many elements the query matches in all. `NoInfer`: the types of `list`'s
   * input come from `filters`, `required` and `params`; letting the compiler infer them from this parameter
   * as well made it instantiate `FromSchema` while still inferring and give up (TS2589, "excessively deep").
   */
  list(
    input: RouteInput<NoInfer<ListQuery<FS, R>>, undefined, NoInfer<Validated<PS, Record<string, string>>>>,
    window: PageWindow,
  ): Promise<{ data: unknown[]; total: number }>;
}

/**
 * Every list of the API, as the spec fixes them: `GET`, `page` and `per_page` before the list's own filters,
 * unknown parameters refused, a plain JSON array, `X-Total-Count` and a `Link` header that keeps the other
 * parameters as the client sent them (the raw query: a default filled in by the validator, such as the
 * movements' `confirmed_only`, is not added to the links).
 */
export function defineListRoute<
  const FS extends Record<string, JsonSchema> = Record<never, never>,
  const R extends readonly string[] = [],
  const PS extends JSONSchema | undefined = undefined,
>(declaration: ListDeclaration<FS, R, PS>): AnyRoute {
  const { filters, required, description, items, list, ...route } = declaration;
  return {
    ...route,
    params: route.params as JsonSchema | undefined,
    method: 'get',
    query: {
      type: 'object',
      additionalProperties: false,
      ...(required ? { required } : {}),
      properties: { ...pageQueryProperties, ...filters },
    },
    responses: {
      200: { description, schema: { type: 'array', items }, headers: ['pagination'] },
    },
    async handler(input) {
      const typed = input as Parameters<typeof list>[0];
      const { data, total } = await list(typed, pageWindow(typed.query));
      const { ctx, services, query } = typed;
      return {
        body: data,
        headers: paginationHeaders(services.config.api.baseUrl, ctx.path, ctx.query, query, total),
      };
    },
  };
}
