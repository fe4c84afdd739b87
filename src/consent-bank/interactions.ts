/* eslint-disable @typescript-eslint/no-explicit-any -- oidc-provider ships no types (oidc-provider.d.ts) */
import type { IncomingMessage } from 'node:http';
import type { Context } from 'koa';
import { pageHeaders, sendHtml } from '../html/respond.js';
import type { BankPages, InteractionStep, ProviderContext } from './bank-profile.js';
import { PAGE_CSP } from './pages.js';

/*
 * The sign-in and consent pages' plumbing, the same at both banks: the library's interaction details, the
 * page language, the three answers (login, confirm, abort) and handing the result back to the library. What
 * the pages say and what a decision does are the profile's (BankPages).
 */

/** Reads a small urlencoded form (sign-in and consent): 8 KiB is far above any of ours. */
async function readForm(req: IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > 8_192) throw new Error('form too large');
    chunks.push(chunk as Buffer);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

export async function interactionStep(
  ctx: Context,
  path: string,
  context: ProviderContext,
  pages: BankPages,
): Promise<void> {
  const { provider } = context;
  const [, , uid, name] = path.split('/') as [string, string, string, string | undefined];
  let details: any;
  try {
    details = await provider.interactionDetails(ctx.req, ctx.res);
  } catch {
    pageHeaders(ctx, PAGE_CSP);
    return sendHtml(ctx, 400, pages.gone(pages.pickLanguage(undefined, ctx.get('accept-language'))));
  }
  const language = pages.pickLanguage(details.params.ui_locales, ctx.get('accept-language'));
  pageHeaders(ctx, PAGE_CSP);
  if (details.uid !== uid) return sendHtml(ctx, 400, pages.gone(language));
  const step: InteractionStep = { details, language, base: `${context.issuerPath}/interaction/${uid}` };
  if (!(await pages.admits(step, context))) return sendHtml(ctx, 400, pages.gone(language));
  const finish = async (result: unknown, merge: boolean) => {
    ctx.respond = false;
    await provider.interactionFinished(ctx.req, ctx.res, result, { mergeWithLastSubmission: merge });
  };

  if (name === undefined && ctx.method === 'GET') {
    if (details.prompt.name === 'login')
      return sendHtml(ctx, 200, pages.signIn(language, `${step.base}/login`, false, ''));
    return sendHtml(ctx, 200, await pages.consent(step, context));
  }
  if (ctx.method !== 'POST' || name === undefined) {
    ctx.status = 405;
    ctx.set('Allow', name === undefined ? 'GET' : 'POST');
    ctx.body = { error: 'invalid_request', error_description: 'Use the bank’s page' };
    return;
  }
  const form = await readForm(ctx.req).catch(() => new URLSearchParams());
  if (name === 'login') {
    const typed = form.get(pages.identityField) ?? '';
    const accountId = pages.signInAs(typed, form.get('password') ?? '');
    if (!accountId) return sendHtml(ctx, 401, pages.signIn(language, `${step.base}/login`, true, typed));
    return finish({ login: { accountId, ...(pages.signInAcr ? { acr: pages.signInAcr } : {}) } }, false);
  }
  if (name === 'abort') {
    await pages.refuse(step, context);
    return finish({ error: 'access_denied', error_description: 'The user refused the consent' }, false);
  }
  const accountId: string | undefined = details.session?.accountId;
  if (!accountId) return sendHtml(ctx, 400, pages.gone(language));
  const outcome = await pages.confirm(step, accountId, context);
  if ('gone' in outcome) return sendHtml(ctx, 400, pages.gone(language));
  if ('error' in outcome)
    return finish({ error: outcome.error, error_description: outcome.description }, false);
  return finish({ consent: { grantId: outcome.grantId } }, true);
}
