/**
 * The one error type of the appliance. It carries the spec's envelope fields and is mapped to HTTP once
 * (the API's error middleware) and to a CLI exit code once (the base command).
 */
export type ErrorType =
  'invalid_request_error' | 'authentication_error' | 'permission_error' | 'rate_limit_error' | 'api_error';

export interface ErrorEnvelope {
  error: { type: ErrorType; code: string; message: string; param?: string; request_id?: string };
}

export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    readonly code: string,
    message: string,
    readonly param?: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }

  toEnvelope(requestId?: string): ErrorEnvelope {
    const error: ErrorEnvelope['error'] = { type: this.type, code: this.code, message: this.message };
    if (this.param !== undefined) error.param = this.param;
    if (requestId !== undefined) error.request_id = requestId;
    return { error };
  }
}

export const errors = {
  invalidParameter: (param: string, message: string) =>
    new ApiError(400, 'invalid_request_error', 'parameter_invalid', message, param),
  missingParameter: (param: string, message = `Missing required parameter: ${param}.`) =>
    new ApiError(400, 'invalid_request_error', 'parameter_missing', message, param),
  badRequest: (code: string, message: string) => new ApiError(400, 'invalid_request_error', code, message),
  notFound: (message: string, param?: string) =>
    new ApiError(404, 'invalid_request_error', 'resource_missing', message, param),
  conflict: (code: string, message: string, headers: Record<string, string> = {}) =>
    new ApiError(409, 'invalid_request_error', code, message, undefined, headers),
  invalidCredential: (message: string) =>
    new ApiError(401, 'authentication_error', 'invalid_credential', message),
  insufficientScope: (message: string) =>
    new ApiError(403, 'permission_error', 'insufficient_scope', message),
  wrongMode: (message: string) => new ApiError(403, 'permission_error', 'wrong_mode', message),
  forbiddenOrigin: (message: string) => new ApiError(403, 'permission_error', 'origin_not_allowed', message),
  unavailable: (message: string, retryAfterSeconds: number) =>
    new ApiError(503, 'api_error', 'service_unavailable', message, undefined, {
      'Retry-After': String(retryAfterSeconds),
    }),
  internal: (message: string) => new ApiError(500, 'api_error', 'internal_error', message),
};
