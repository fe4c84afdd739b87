/**
 * Finds the route of a request's method and path. koa-router tested every route's regular expression on
 * every request and composed the matched layers' middleware anew each time, about 10 µs of a one-row GET
 * (bench/api-overhead.ts); this looks at the routes with as many segments as the path, in the order they
 * were declared, and compares text.
 *
 * It matches as koa-router (path-to-regexp 8, its defaults) did, so no URL changes meaning: the fixed
 * segments ignore case, one trailing slash is allowed, a parameter is one non-empty segment, percent-decoded
 * with `+` read as a space (and kept as sent when it does not decode), HEAD finds the GET route, and the
 * first declared route wins.
 */

export interface TableEntry<R> {
  /** Upper case, as in `ctx.method`. */
  method: string;
  /** OpenAPI template, e.g. `/v1/links/{linkId}`. */
  path: string;
  route: R;
}

export type RouteMatch<R> =
  | { kind: 'route'; route: R; params: Record<string, string> }
  /** The path is known, the method is not: these are the methods it has, for `Allow`. */
  | { kind: 'method'; allowed: string[] }
  | { kind: 'none' };

interface Compiled<R> {
  methods: string[];
  /** Lower-case text of each segment, or null where the segment is a parameter. */
  fixed: (string | null)[];
  names: (string | null)[];
  route: R;
}

export class RouteTable<R> {
  /** By number of segments; each list in the order the routes were declared. */
  private readonly bySegments = new Map<number, Compiled<R>[]>();

  constructor(entries: readonly TableEntry<R>[]) {
    for (const entry of entries) {
      const segments = entry.path.split('/');
      const compiled: Compiled<R> = {
        methods: entry.method === 'GET' ? ['HEAD', 'GET'] : [entry.method],
        fixed: segments.map((segment) => (isParam(segment) ? null : segment.toLowerCase())),
        names: segments.map((segment) => (isParam(segment) ? segment.slice(1, -1) : null)),
        route: entry.route,
      };
      const list = this.bySegments.get(segments.length) ?? [];
      list.push(compiled);
      this.bySegments.set(segments.length, list);
    }
  }

  match(method: string, path: string): RouteMatch<R> {
    const trimmed = path.length > 1 && path.endsWith('/') ? path.slice(0, -1) : path;
    const segments = trimmed.split('/');
    const candidates = this.bySegments.get(segments.length);
    if (!candidates) return NONE;
    // Lower case changes no '/', so the segments line up with `segments`.
    const lower = trimmed.toLowerCase().split('/');
    let allowed: string[] | undefined;
    for (const candidate of candidates) {
      if (!fits(candidate, lower)) continue;
      if (candidate.methods.includes(method)) {
        return { kind: 'route', route: candidate.route, params: paramsOf(candidate, segments) };
      }
      allowed ??= [];
      for (const known of candidate.methods) if (!allowed.includes(known)) allowed.push(known);
    }
    return allowed ? { kind: 'method', allowed } : NONE;
  }
}

const NONE = { kind: 'none' } as const;

function isParam(segment: string): boolean {
  return segment.startsWith('{') && segment.endsWith('}');
}

function fits<R>(candidate: Compiled<R>, lower: string[]): boolean {
  for (let i = 0; i < lower.length; i++) {
    const fixed = candidate.fixed[i];
    if (fixed === null ? lower[i] === '' : fixed !== lower[i]) return false;
  }
  return true;
}

function paramsOf<R>(candidate: Compiled<R>, segments: string[]): Record<string, string> {
  const params: Record<string, string> = {};
  for (let i = 0; i < segments.length; i++) {
    const name = candidate.names[i];
    if (name !== null && name !== undefined) params[name] = decodeParam(segments[i]!);
  }
  return params;
}

function decodeParam(text: string): string {
  if (!text.includes('%') && !text.includes('+')) return text;
  try {
    return decodeURIComponent(text.replace(/\+/g, ' '));
  } catch {
    return text;
  }
}
