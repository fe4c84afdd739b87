import { hkdfSync } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Context } from 'koa';
import type { BankRuntime, Caller, ProviderContext, ResourceRequest } from './bank-profile.js';
import { retryAfterOf, type UserFaults } from './faults.js';
import { openPaginationKey, paginationKey } from './pagination.js';
import {
  brokenAnswer,
  dateWindow,
  errorAnswer,
  interactionId,
  type Answer,
  type MatchedOperation,
  type SpecRouter,
} from './resource-server.js';
import { breakAnswer, type Paging } from './resources.js';

/*
 * One call to an Open Finance API, in the order a bank answers it: the operation the file routes it to (404
 * when none), the request against the file (400; a missing `Authorization` is RFC 6750's 401), the token
 * (401/403), the faults on demand, the profile's handler, and the answer checked against the file before it
 * leaves (a 500, logged, when it does not meet it). The "breaks the schema" fault is applied after that check:
 * it is the bank misbehaving on purpose, for the connector's checker to catch.
 */

const BODY_LIMIT = 16_384;

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > BODY_LIMIT) throw new Error('body too large');
    chunks.push(chunk as Buffer);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  return text === '' ? undefined : JSON.parse(text);
}

/** `page`, `page-size` (the file's defaults when absent) and `pagination-key`, and the moment the list is cut at. */
function pagingOf(operation: MatchedOperation, secret: Buffer, listPath: string, now: number) {
  const number = (name: string) => Number(operation.query[name] ?? operation.defaultOf(name));
  const paging: Paging = { page: number('page'), pageSize: number('page-size') };
  if (!operation.defines('pagination-key')) return { paging, at: now };
  const given = operation.query['pagination-key'];
  if (given === undefined)
    return { paging: { ...paging, key: paginationKey(secret, listPath, now) }, at: now };
  const at = openPaginationKey(secret, listPath, given, now);
  if (at === null) return null;
  return { paging: { ...paging, key: given }, at };
}

/** A fault that answers instead of the bank, after the token was checked. */
function faultAnswer(faults: UserFaults, now: number): Answer | null {
  switch (faults.resourceStatus) {
    case 401:
      return errorAnswer(401, 'UNAUTHORIZED', 'The bank refused the token (fault)', now, {
        'WWW-Authenticate': 'Bearer error="invalid_token"',
      });
    case 403:
      return errorAnswer(403, 'FORBIDDEN', 'The bank refused the call (fault)', now);
    case 429:
    case 529:
      return errorAnswer(faults.resourceStatus, 'TOO_MANY_REQUESTS', 'Too many requests (fault)', now, {
        'Retry-After': String(retryAfterOf(faults)),
      });
    default:
      return null;
  }
}

function send(ctx: Context, answer: Answer, interaction: string): void {
  ctx.status = answer.status;
  for (const [name, value] of Object.entries(answer.headers ?? {})) ctx.set(name, value);
  ctx.set('x-fapi-interaction-id', interaction);
  if (answer.body !== undefined) ctx.body = answer.body;
}

/** The request as the handler reads it, or the answer that refuses it before the handler. */
async function prepare(
  ctx: Context,
  path: string,
  operation: MatchedOperation,
  caller: Caller,
  context: ProviderContext,
  secret: Buffer,
): Promise<ResourceRequest | Answer> {
  const now = context.clock.now();
  const cut = pagingOf(operation, secret, path, now);
  if (!cut)
    return errorAnswer(
      422,
      'PAGINACAO_INVALIDA',
      'pagination-key is not one this bank gave for this list, or is older than 10 minutes',
      now,
    );
  return {
    operation,
    caller,
    faults: context.faults.forUser(caller.faultsOf),
    self: new URL(`${context.mtlsOrigin}${ctx.url}`),
    now,
    at: cut.at,
    paging: cut.paging,
    window: () => {
      const window = dateWindow(operation, cut.at);
      return 'code' in window ? errorAnswer(window.status, window.code, window.detail, now) : window;
    },
    body: undefined,
    ctx,
  };
}

export async function resourceCall(
  ctx: Context,
  path: string,
  context: ProviderContext,
  runtime: BankRuntime,
  router: SpecRouter,
  keyLabel: string,
): Promise<void> {
  const { clock, log } = context;
  const interaction = interactionId(ctx);
  const now = clock.now();
  const secret = Buffer.from(
    hkdfSync('sha256', Buffer.from(context.store.keys.hmac), Buffer.alloc(0), `pagination${keyLabel}`, 32),
  );
  let body: unknown;
  if (ctx.method === 'POST' || ctx.method === 'PUT' || ctx.method === 'PATCH') {
    if (!/^application\/json\b/i.test(ctx.get('content-type')))
      return send(
        ctx,
        errorAnswer(415, 'UNSUPPORTED_MEDIA_TYPE', 'Send application/json', now),
        interaction.id,
      );
    try {
      body = await readJson(ctx.req);
    } catch {
      return send(ctx, errorAnswer(400, 'PARAMETRO_INVALIDO', 'The body is not JSON', now), interaction.id);
    }
  }
  const matched = router.match(ctx, path, body);
  if (!matched) return send(ctx, errorAnswer(404, 'NOT_FOUND', 'No such resource', now), interaction.id);
  const { operation, problems } = matched;
  if (problems.some((p) => p.where === 'header' && p.name === 'authorization' && !ctx.get('authorization')))
    return send(
      ctx,
      errorAnswer(401, 'UNAUTHORIZED', 'An access token is required', now, { 'WWW-Authenticate': 'Bearer' }),
      interaction.id,
    );
  if (problems.length > 0 || !interaction.valid) {
    const detail = problems.length
      ? problems
          .slice(0, 3)
          .map((p) => `${p.where}${p.name ? ` ${p.name}` : ''} ${p.message}`)
          .join('; ')
      : 'x-fapi-interaction-id must be a UUID';
    return send(ctx, errorAnswer(400, 'PARAMETRO_INVALIDO', detail, now), interaction.id);
  }
  const caller = await runtime.authorize(ctx, operation);
  if ('status' in caller) return send(ctx, caller, interaction.id);
  const handler = runtime.handlers[operation.operationId];
  if (!handler)
    return send(
      ctx,
      errorAnswer(404, 'NOT_FOUND', `${operation.operationId} is not offered by this bank`, now),
      interaction.id,
    );
  const request = await prepare(ctx, path, operation, caller, context, secret);
  if ('status' in request) return send(ctx, request, interaction.id);
  if (request.faults.delayMs) await sleep(request.faults.delayMs);
  // The suite's refresh-token test: every token is refused until the client has refreshed enough times.
  const fault = context.faults.awaitingRefreshes()
    ? errorAnswer(401, 'UNAUTHORIZED', 'The bank wants a refreshed access token (fault)', now, {
        'WWW-Authenticate': 'Bearer error="invalid_token"',
      })
    : faultAnswer(request.faults, now);
  if (fault) return send(ctx, fault, interaction.id);
  let answer = await handler({ ...request, body });
  answer = {
    ...answer,
    headers: { ...answer.headers, 'x-fapi-interaction-id': interaction.id, 'x-v': operation.version },
  };
  const broken = router.checkAnswer(operation, answer);
  if (broken.length > 0) answer = brokenAnswer(log, operation, broken, now);
  else if (request.faults.breakSchema && answer.status === 200)
    answer = { ...answer, body: breakAnswer(answer.body) };
  send(ctx, answer, interaction.id);
}
