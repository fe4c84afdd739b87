import type { Context, Next } from 'koa';
import { koaBody } from 'koa-body';
import { ApiError, errors } from '../errors/api-error.js';

/**
 * The API's bodies are at most 3 levels deep. Code after the parser recurses over the body (the
 * idempotency hash's `JSON.stringify` overflows the stack near 10,000 levels), so anything deeper is refused.
 */
export const MAX_JSON_DEPTH = 32;

const UNPARSED = Symbol.for('unparsedBody');

const notJson = (message: string) => errors.badRequest('invalid_json', message);

/**
 * koa-body for a JSON object or array of at most `limitBytes` once inflated, refusing what co-body lets
 * through or reports without an HTTP status or a reason; its other errors (413, aborted) go to toApiError.
 */
export function jsonBodyReader(limitBytes: number): (ctx: Context) => Promise<unknown> {
  // koa-body ships its own copy of Koa's types, hence the cast to ours.
  const parse = koaBody({
    json: true,
    urlencoded: false,
    text: false,
    multipart: false,
    jsonStrict: true,
    jsonLimit: limitBytes,
    includeUnparsed: true,
    onError: (error) => {
      throw refusal(error);
    },
  }) as unknown as (ctx: Context, next: Next) => Promise<void>;
  return async (ctx) => {
    // co-body pipes the request into a decompressor and stops listening to it when it gives up (a 413); a
    // corrupt byte still inside it would then be an 'error' with no listener, which ends the process.
    const request = ctx.req;
    const pipe = request.pipe.bind(request);
    const ignore = () => undefined;
    request.pipe = (destination, options) => pipe(destination.on('error', ignore), options);
    await parse(ctx, async () => undefined);
    const body = (ctx.request as { body?: Record<symbol, unknown> }).body;
    const raw = body?.[UNPARSED];
    // Handlers copy bodies with spreads, which would carry the symbol along.
    delete body?.[UNPARSED];
    const problem = typeof raw === 'string' ? problemIn(raw) : null;
    if (problem) throw notJson(problem);
    return body;
  };
}

function refusal(error: Error & { status?: unknown; code?: unknown; body?: unknown }): Error {
  // co-body attaches the text to any parse failure, a RangeError from extreme nesting included.
  if (typeof error.body === 'string')
    return notJson(problemIn(error.body) ?? 'The request body is not valid JSON.');
  // The inflater's errors (zlib's Z_DATA_ERROR, Z_BUF_ERROR, brotli's ERR__ERROR_…) have no HTTP status.
  if (typeof error.code === 'string' && /^(Z_|ERR__ERROR_)/.test(error.code))
    return notJson('The request body could not be decompressed.');
  if (error.status === 415)
    return new ApiError(
      415,
      'invalid_request_error',
      'unsupported_media_type',
      'This Content-Encoding is not supported; send gzip, deflate, br or none.',
    );
  return error;
}

function problemIn(text: string): string | null {
  // co-body decodes bytes that are not UTF-8 as U+FFFD: what was stored would not be what the client sent.
  if (text.includes('\uFFFD'))
    return 'The request body is not valid UTF-8 (a U+FFFD in it must be escaped as \\ufffd).';
  if (nestingDepth(text) > MAX_JSON_DEPTH)
    return `The request body is nested more than ${MAX_JSON_DEPTH} levels deep.`;
  return null;
}

/**
 * The deepest `[`/`{` outside strings, read from the text so that a body too deep to parse, or unclosed,
 * is named for its depth too. Iterative: a recursive walk is what deep nesting would overflow.
 */
function nestingDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length && deepest <= MAX_JSON_DEPTH; i++) {
    const code = text.charCodeAt(i);
    if (inString) {
      if (code === 0x5c) i++;
      else if (code === 0x22) inString = false;
    } else if (code === 0x22) inString = true;
    else if (code === 0x5b || code === 0x7b) deepest = Math.max(deepest, ++depth);
    else if (code === 0x5d || code === 0x7d) depth--;
  }
  return deepest;
}
