/*
 * What a consent bank said when it refused something, kept so an operator can read the bank's own words
 * (issue 41: a permanent refusal must not look like an outage): the HTTP status, and the OAuth `error` and
 * `error_description` (RFC 6749 §5.2) or Open Finance Brasil's `errors[0].code` when it sent them. Never a
 * secret: the words are cut short, stripped of control characters, and anything shaped like a token, a
 * JWT or a long opaque value the bank might echo is masked.
 */

/** A `Retry-After` beyond this is read as this: the job is tried again within the hour regardless. */
const MAX_RETRY_AFTER_S = 3_600;
/**
 * When a 429 or 529 carries no usable `Retry-After`: the draft's per-minute window, or a few seconds. A 503
 * is read only when it carries one (Grant Management's revoke), and a minute if it cannot be read.
 */
const DEFAULT_RETRY_AFTER_S = { 429: 60, 503: 60, 529: 5 } as const;

/** `Retry-After` as seconds or an HTTP date (RFC 9110 §10.2.3), to ms since the epoch, within bounds. */
export function retryAtOf(header: string | null, status: 429 | 503 | 529, now: number): number {
  let seconds: number = DEFAULT_RETRY_AFTER_S[status];
  if (header !== null && /^\d+$/.test(header.trim())) seconds = Number(header.trim());
  else if (header !== null && !Number.isNaN(Date.parse(header)))
    seconds = Math.ceil((Date.parse(header) - now) / 1000);
  return now + Math.min(Math.max(seconds, 0), MAX_RETRY_AFTER_S) * 1000;
}

/**
 * When the bank said to call again: a 429 or 529 always means later (its `Retry-After`, else a default); a
 * 503 when it says so (RFC 9110 §15.6.4: a bank down for maintenance may name its end). Else null.
 */
export function retryAtOfAnswer(status: number, retryAfter: string | null, now: number): number | null {
  if (status === 429 || status === 529) return retryAtOf(retryAfter, status, now);
  if (status === 503 && retryAfter !== null) return retryAtOf(retryAfter, 503, now);
  return null;
}

/** An OAuth error code's shape (RFC 6749 §5.2: printable ASCII without `"` and `\`; in practice words and `_`). */
const ERROR_CODE = /^[A-Za-z][A-Za-z0-9_.-]{0,59}$/;
/** Anything a bank might echo that could be a credential: a JWT, or a run of 20+ token characters. */
const TOKEN_LIKE = /[A-Za-z0-9_~+/=.-]{20,}/g;

/** Control and bidi characters: a bank's text may carry them, and none is printed. */
// eslint-disable-next-line no-control-regex -- matching them is the point
export const UNPRINTABLE = /[\u0000-\u001f\u007f-\u009f\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/** A bank's text made safe to print: one line, no control or bidi characters, no token-shaped run, short. */
export function safeWords(text: string, max = 200): string {
  const cleaned = text.replace(UNPRINTABLE, ' ').replace(TOKEN_LIKE, '…').replace(/\s+/g, ' ').trim();
  return cleaned.length > max ? `${cleaned.slice(0, max - 1)}…` : cleaned;
}

/** The bank's own words of a refusal: `HTTP 400 invalid_authorization_details: type Foo is not allowed`. */
export interface BankWords {
  status: number | null;
  error: string | null;
  description: string | null;
}

/** Reads an answer body (OAuth error JSON, or Open Finance Brasil's `errors` array) into the bank's words. */
export function bankWordsOf(status: number | null, body: unknown): BankWords {
  const oauth = (body ?? {}) as { error?: unknown; error_description?: unknown };
  const brasil = (body as { errors?: { code?: unknown; title?: unknown; detail?: unknown }[] } | null)
    ?.errors?.[0];
  const code = typeof oauth.error === 'string' ? oauth.error : brasil?.code;
  const text =
    typeof oauth.error_description === 'string'
      ? oauth.error_description
      : typeof brasil?.detail === 'string'
        ? brasil.detail
        : typeof brasil?.title === 'string'
          ? brasil.title
          : null;
  return {
    status,
    error: typeof code === 'string' && ERROR_CODE.test(code) ? code : null,
    description: text === null ? null : safeWords(text) || null,
  };
}

/** `HTTP 400 invalid_request: the description`, or the parts there are. */
export function describeBankWords(words: BankWords): string {
  const said =
    words.error === null
      ? words.description
      : words.description === null
        ? words.error
        : `${words.error}: ${words.description}`;
  const parts = [words.status === null ? null : `HTTP ${words.status}`, said];
  return parts.filter((part): part is string => part !== null).join(' ') || 'no answer';
}

/**
 * The bank's words from an error openid-client threw (`ResponseBodyError`: status, error, description;
 * `AuthorizationResponseError`: error, description), or the network's code when the bank did not answer.
 */
export function bankWordsOfError(error: unknown): BankWords {
  const e = error as {
    status?: unknown;
    error?: unknown;
    error_description?: unknown;
    cause?: unknown;
    code?: unknown;
    name?: unknown;
  };
  if (typeof e.error === 'string')
    return bankWordsOf(typeof e.status === 'number' ? e.status : null, {
      error: e.error,
      error_description: e.error_description,
    });
  const response = e.cause as { status?: unknown } | undefined;
  if (typeof response?.status === 'number')
    return { status: response.status, error: null, description: null };
  const cause = e.cause as { code?: unknown; cause?: { code?: unknown } } | undefined;
  const network = cause?.cause?.code ?? cause?.code ?? e.code;
  const said =
    e.name === 'TimeoutError' ? 'no answer in time' : typeof network === 'string' ? network : 'no answer';
  return { status: null, error: null, description: safeWords(said, 60) };
}
