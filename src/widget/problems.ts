import { ApiError } from '../errors/api-error.js';
import type { Locale } from '../html/locale.js';
import { CATALOGUES, format, type MessageKey } from './messages.js';

/**
 * What the widget tells a person when something stops the flow: a title, what happened and what to do
 * next, and whether trying again in the same widget can help. The codes are the ones the widget's JSON API
 * and the refresh intents use, so the page and the API never word the same failure twice; the words are
 * in the catalogue of the person's language (messages.ts).
 */
export interface Problem {
  code: string;
  title: string;
  message: string;
  /** Whether the person can fix it here (back to the credentials form); otherwise only Close is offered. */
  retry: boolean;
}

export interface ProblemContext {
  bankName?: string;
  connectionLimit?: number;
  tokenTtlMinutes?: number;
  /** When trying again can help (a busy bank, too many starts): seconds from now, as `Retry-After` says. */
  retryAfterSeconds?: number;
}

/** "in 42 seconds", "en 3 minutos": when to try again, in the person's words. */
export function waitWords(seconds: number | undefined, catalogue: (typeof CATALOGUES)[Locale]): string {
  if (seconds === undefined || seconds <= 1) return catalogue['wait.soon'];
  if (seconds < 90) return format(catalogue['wait.seconds'], { n: Math.ceil(seconds) });
  return format(catalogue['wait.minutes'], { n: Math.ceil(seconds / 60) });
}

/** Problems the person can fix in the same window. */
const RETRYABLE = new Set([
  'rejected_credentials',
  'bank_unavailable',
  'timeout',
  'mfa_required',
  'holder_mismatch',
  'refresh_in_progress',
  'institution_unavailable',
  'consent_denied',
  'consent_expired',
  'consent_invalid',
  'consent_revoked',
  'bank_busy',
  'starts_limited',
  'session_starts_limited',
]);

/** Codes worded alike. */
const SAME_AS: Record<string, string> = { action_required: 'account_locked', timeout: 'bank_unavailable' };

export function describeProblem(code: string, context: ProblemContext = {}, locale: Locale = 'en'): Problem {
  const catalogue = CATALOGUES[locale];
  const params = {
    bank: context.bankName ?? catalogue['bank.defaultTitle'],
    bankLower: context.bankName ?? catalogue['bank.default'],
    minutes: context.tokenTtlMinutes ?? 10,
    when: waitWords(context.retryAfterSeconds, catalogue),
    code,
  };
  const worded = SAME_AS[code] ?? code;
  const key = (part: string) => `problem.${worded}.${part}` as MessageKey;
  if (worded === 'connection_limit_reached') {
    const limit = context.connectionLimit;
    return {
      code,
      title: format(catalogue[key('title')], params),
      message: format(catalogue[limit === 1 ? key('messageOne') : key('messageMany')], {
        ...params,
        count: limit ?? '',
      }).replace(/ {2}/, ' '),
      retry: false,
    };
  }
  if (!(key('title') in catalogue))
    return {
      code,
      title: catalogue['problem.default.title'],
      message: format(catalogue['problem.default.message'], params),
      retry: false,
    };
  return {
    code,
    title: format(catalogue[key('title')], params),
    message: format(catalogue[key('message')], params),
    retry: RETRYABLE.has(code),
  };
}

/** A step of the widget refused with `code`, in the envelope of its JSON API and in the person's words. */
export function refuse(
  code: string,
  status = 409,
  context: ProblemContext = {},
  locale: Locale = 'en',
): ApiError {
  return new ApiError(status, 'invalid_request_error', code, describeProblem(code, context, locale).message);
}
