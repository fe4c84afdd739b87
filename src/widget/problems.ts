/**
 * What the widget tells a person when something stops the flow: a title, what happened and what to do
 * next, and whether trying again in the same widget can help. The codes are the ones the widget's JSON API
 * and the refresh intents use, so the page and the API never word the same failure twice.
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
}

const START_AGAIN = 'Go back to the app and start again.';

export function describeProblem(code: string, context: ProblemContext = {}): Problem {
  const bank = context.bankName ?? 'Your bank';
  const make = (title: string, message: string, retry = false): Problem => ({ code, title, message, retry });
  switch (code) {
    case 'token_consumed':
      return make(
        'This link was already used',
        `For your security, each connection link opens only once. ${START_AGAIN}`,
      );
    case 'token_expired':
      return make(
        'This link has expired',
        `Connection links are valid for ${context.tokenTtlMinutes ?? 10} minutes. ${START_AGAIN}`,
      );
    case 'token_invalid':
      return make(
        'This link is not valid',
        `The link is incomplete or no longer waiting to be opened. ${START_AGAIN}`,
      );
    case 'origin_invalid':
      return make(
        'This page cannot be opened here',
        'The widget must be opened by an allowed website through embed.js. If you run that website, check the allowed origins in the widget settings.',
      );
    case 'rejected_credentials':
      return make(
        'Your bank did not accept these details',
        'Check your RUT and password and try again. Several failed attempts may lock your online banking access.',
        true,
      );
    case 'account_locked':
    case 'action_required':
      return make(
        `${bank} needs your attention`,
        `Log in to ${bank === 'Your bank' ? 'your bank' : bank}'s website or app and follow its instructions, then come back and try again.`,
      );
    case 'bank_unavailable':
    case 'timeout':
      return make(
        `${bank} is not responding`,
        'The bank could not be reached just now. Try again in a few minutes.',
        true,
      );
    case 'mfa_invalid':
      return make(
        'The code was not correct',
        `${bank} did not accept the verification code, so the update was stopped. ${START_AGAIN}`,
      );
    case 'mfa_expired':
      return make(
        'The code arrived too late',
        `Verification codes are only valid for a few minutes, so the update was stopped. ${START_AGAIN}`,
      );
    case 'mfa_required':
      return make(
        `${bank} asked for a verification code`,
        'The code could not be requested in this step. Try again.',
        true,
      );
    case 'connection_limit_reached':
      return make(
        'You cannot connect more banks',
        `You already have ${context.connectionLimit ?? 'the maximum number of'} connected bank${context.connectionLimit === 1 ? '' : 's'}, the most this app allows. Remove a connection in the app to add another.`,
      );
    case 'link_not_expired':
      return make(
        'This connection already works',
        'There is nothing to reconnect: the connection to your bank is active. Go back to the app.',
      );
    case 'holder_mismatch':
      return make(
        'This is a different bank login',
        'This connection was made with another bank login. Sign in with the same RUT (and, for a company, the same company RUT) that was used to connect it.',
        true,
      );
    case 'link_missing':
      return make('This connection no longer exists', `It was removed. ${START_AGAIN}`);
    case 'too_many_attempts':
      return make(
        'Too many attempts',
        `For your security this window stopped accepting attempts. ${START_AGAIN}`,
      );
    case 'session_expired':
      return make('This window has timed out', START_AGAIN);
    case 'institution_unavailable':
      return make(
        `${bank} is not available`,
        'Connections to this bank are not offered right now. Choose another bank.',
        true,
      );
    default:
      return make('Something went wrong', `The connection could not be completed (${code}). ${START_AGAIN}`);
  }
}
