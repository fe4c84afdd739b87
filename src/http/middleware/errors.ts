import type { Context } from 'koa';
import { ApiError, errors } from '../../errors/api-error.js';
import { isUnavailableError } from '../../db/errors.js';

/**
 * Answers a failed request with the spec's envelope; the request frame (request-context.ts) calls it for
 * every failure, so nothing else writes an error body.
 */
export function answerWithError(ctx: Context, caught: unknown): void {
  const error = toApiError(caught);
  if (error.status >= 500) {
    ctx.state.logger?.error({ err: caught, request_id: ctx.state.requestId }, 'request failed');
  }
  ctx.status = error.status;
  for (const [name, value] of Object.entries(error.headers)) ctx.set(name, value);
  ctx.body = error.toEnvelope(ctx.state.requestId as string | undefined);
}

/** What a request no route answered is. */
export function unrecognised(ctx: Context): ApiError {
  return new ApiError(
    404,
    'invalid_request_error',
    'resource_missing',
    `Unrecognized request URL (${ctx.method}: ${ctx.path}).`,
  );
}

export function toApiError(caught: unknown): ApiError {
  if (caught instanceof ApiError) return caught;
  if (isUnavailableError(caught))
    return errors.unavailable('The database is not answering; retry shortly.', 5);
  const status =
    (caught as { status?: number; statusCode?: number })?.status ??
    (caught as { statusCode?: number })?.statusCode;
  const type = (caught as { type?: string })?.type;
  if (status === 413) {
    return new ApiError(
      413,
      'invalid_request_error',
      'request_too_large',
      'The request body is larger than this server accepts.',
    );
  }
  if (status === 415) {
    return new ApiError(
      415,
      'invalid_request_error',
      'unsupported_media_type',
      'Send request bodies as application/json.',
    );
  }
  if (
    status === 400 &&
    (type === 'entity.parse.failed' || /JSON|Unexpected|token/i.test(String((caught as Error).message)))
  ) {
    return errors.badRequest('invalid_json', 'The request body is not valid JSON.');
  }
  if (status === 400) return errors.badRequest('invalid_request', 'The request could not be read.');
  return errors.internal('An unexpected error occurred. Quote the request id to your operator.');
}
