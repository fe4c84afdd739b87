import { randomUUID } from 'node:crypto';
import type { Context } from 'koa';
import { OpenAPIBackend, type Operation } from 'openapi-backend';
import addFormats from 'ajv-formats';
import type { Ajv } from 'ajv';
import { openApiDocument, type BrasilFile, type Market } from '../open-finance/schemas.js';
import type { Logger } from '../logging/logger.js';

/*
 * The simulated banks' resource server: every request is routed and checked against Open Finance Brasil's
 * OpenAPI files themselves (src/open-finance/specs/, read through `openApiDocument` in the bank's market), and
 * every answer is checked against the same files before it leaves.
 *
 * The library is openapi-backend (openapistack/openapi-backend): framework-agnostic, so it sits behind Koa
 * without an Express shim; it routes by the document's paths, builds one Ajv schema per operation from its
 * parameters (path, query with `additionalProperties: false`, so a parameter the file does not define for the
 * operation is refused rather than ignored; required headers such as `Authorization` and
 * `x-fapi-interaction-id`) and validates answers and their headers by status. One instance per file and
 * market is built once a process, its validators compiled lazily (see `quick` below), and shared by the banks
 * of that market; the handlers stay with each bank.
 */

/**
 * An OpenAPI document a bank serves beside the files of specs/, written in code from a standard's own text
 * where its file is not in the tree (Brazil's customers 2.2.1: brasil/customers.ts). Routed and checked as the
 * files are.
 */
export interface WrittenDocument {
  /** Its name where a file's would be (`customers-2.2.1`): the operation's `file`, the `x-v` from its version. */
  name: string;
  document: Record<string, unknown>;
}

export interface Answer {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** One operation of a file, as a request matched it. */
export interface MatchedOperation {
  /** The file's name (`accounts-2.4.2`), or a written document's. */
  file: string;
  /** The file's `info.version`: the `x-v` header the consents and resources files ask of every answer. */
  version: string;
  operationId: string;
  /** Path parameters, decoded. */
  params: Record<string, string>;
  /** Query parameters as sent (each once: a repeated one fails validation first). */
  query: Record<string, string>;
  /** The default the file documents for a query parameter, if any. */
  defaultOf(name: string): unknown;
  /** Whether the file defines this query parameter for the operation. */
  defines(name: string): boolean;
}

interface FileApi {
  file: string;
  version: string;
  root: string;
  api: OpenAPIBackend;
}

export interface SpecRouter {
  /** The operation a request names, with why it is refused (schema errors), or null: no such operation. */
  match(
    ctx: Context,
    path: string,
    body?: unknown,
  ): { operation: MatchedOperation; problems: RequestProblem[] } | null;
  /** Why an answer does not meet the file (empty: it does). */
  checkAnswer(operation: MatchedOperation, answer: Answer): string[];
}

export interface RequestProblem {
  /** `header`, `query`, `path` */
  where: string;
  /** The parameter concerned, when one is. */
  name: string | null;
  message: string;
}

function customizeAjv(ajv: Ajv): Ajv {
  addFormats.default(ajv);
  // OpenAPI 3.0's numeric formats are not JSON Schema's: the type already says what they check.
  for (const format of ['double', 'int32', 'int64', 'float', 'integer']) ajv.addFormat(format, true);
  return ajv;
}

/** The API root a file's servers name (`https://api.banco.com.br/open-banking/accounts/v2` → its path). */
function rootOf(document: Record<string, unknown>): string {
  const servers = document.servers as { url: string }[] | undefined;
  return new URL(servers?.[0]?.url ?? 'https://bank.invalid/').pathname.replace(/\/$/, '');
}

const compiled = new Map<string, Promise<FileApi>>();

async function fileApi(file: BrasilFile | WrittenDocument, market: Market): Promise<FileApi> {
  const name = typeof file === 'string' ? file : file.name;
  const key = `${market}:${name}`;
  let pending = compiled.get(key);
  if (!pending) {
    pending = (async () => {
      const definition =
        typeof file === 'string' ? openApiDocument(file, market) : structuredClone(file.document);
      const root = rootOf(definition);
      // `strict`: a document the library cannot read stops the bank instead of warning.
      const api = new OpenAPIBackend({
        definition: definition as never,
        apiRoot: root,
        strict: true,
        validate: true,
        // Validators compiled per operation at its first request, not all at start: compiling every one of
        // the four files took 9.4 s of one core here (accounts alone 5.1 s), blocking the API process's event
        // loop while it serves (its /health answered 503 for seconds after `svc serve` said it was ready).
        // Quick mode takes 26 ms for the four; an operation's first request pays its own compilation once.
        quick: true,
        customizeAjv: customizeAjv as never,
      });
      await api.init();
      return { file: name, version: String((definition.info as { version?: unknown }).version), root, api };
    })();
    compiled.set(key, pending);
    pending.catch(() => compiled.delete(key));
  }
  return pending;
}

function problemsOf(errors: readonly { instancePath?: string; message?: string; params?: unknown }[] | null) {
  return (errors ?? []).map((error): RequestProblem => {
    const [where = 'request', name = null] = (error.instancePath ?? '').split('/').filter(Boolean);
    const params = (error.params ?? {}) as Record<string, unknown>;
    const named =
      name ??
      (typeof params.missingProperty === 'string'
        ? params.missingProperty
        : typeof params.additionalProperty === 'string'
          ? params.additionalProperty
          : null);
    return { where, name: named, message: error.message ?? 'is invalid' };
  });
}

/** A router over the files a bank serves, as its market reads them, and the documents it writes itself. */
export async function specRouter(
  files: readonly BrasilFile[],
  market: Market,
  written: readonly WrittenDocument[] = [],
): Promise<SpecRouter> {
  const apis = await Promise.all([...files, ...written].map((file) => fileApi(file, market)));
  const find = (path: string) =>
    apis.find(({ root }) => path === root || path.startsWith(`${root}/`)) ?? null;
  const operationOf = (found: FileApi, id: string) => found.api.getOperation(id) as Operation;

  return {
    match(ctx, path, body) {
      const found = find(path);
      if (!found) return null;
      const request = {
        method: ctx.method,
        path,
        query: ctx.querystring,
        headers: ctx.headers as Record<string, string | string[]>,
        body,
      };
      const operation = found.api.matchOperation(request);
      if (!operation) return null;
      const parsed = found.api.router.parseRequest(request, operation);
      const validation = found.api.validateRequest(request, operation);
      const parameters = (operation.parameters ?? []) as {
        in: string;
        name: string;
        schema?: { default?: unknown };
      }[];
      const query: Record<string, string> = {};
      for (const [name, value] of Object.entries(parsed.query ?? {}))
        if (typeof value === 'string') query[name] = value;
      return {
        operation: {
          file: found.file,
          version: found.version,
          operationId: operation.operationId!,
          params: parsed.params as Record<string, string>,
          query,
          defaultOf: (name) => parameters.find((p) => p.in === 'query' && p.name === name)?.schema?.default,
          defines: (name) => parameters.some((p) => p.in === 'query' && p.name === name),
        },
        problems: validation.valid ? [] : problemsOf(validation.errors as never),
      };
    },

    checkAnswer(matched, answer) {
      const found = apis.find((a) => a.file === matched.file)!;
      const operation = operationOf(found, matched.operationId);
      // A 204 has no content, which the library reads as `null`.
      const body = found.api.validateResponse(answer.body ?? null, operation, answer.status);
      const headers = found.api.validateResponseHeaders(answer.headers ?? {}, operation, {
        statusCode: answer.status,
        setMatchType: 'superset' as never,
      });
      return [...problemsOf(body.errors as never), ...problemsOf(headers.errors as never)].map(
        (p) => `${p.where}${p.name ? ` ${p.name}` : ''} ${p.message}`,
      );
    },
  };
}

/** x-fapi-interaction-id as the files ask: echoed when it is a UUID, else one of the bank's (and a 400). */
export function interactionId(ctx: Context): { id: string; valid: boolean } {
  const asked = ctx.get('x-fapi-interaction-id');
  const valid = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/.test(asked);
  return { id: valid ? asked : randomUUID(), valid };
}

/** The files' `ResponseError`; `totalRecords`/`totalPages` too, which the data files' error meta requires. */
export function errorAnswer(
  status: number,
  code: string,
  detail: string,
  now: number,
  extra?: Record<string, string>,
): Answer {
  return {
    status,
    headers: extra,
    body: {
      errors: [{ code, title: code, detail: detail.slice(0, 2048) }],
      meta: {
        totalRecords: 1,
        totalPages: 1,
        requestDateTime: new Date(Math.floor(now / 1000) * 1000).toISOString().replace('.000Z', 'Z'),
      },
    },
  };
}

/**
 * The window of whole UTC days a transactions request asks, read as the files say: `from…Date` and `to…Date`
 * (accounts 2.4.2 `fromBookingDate`/`toBookingDate`, credit-cards 2.3.1 `fromTransactionDate`/
 * `toTransactionDate`) go together ("must be sent if the other is"), and a missing one is today. The end may be
 * in the future (scheduled entries). A string is why the request is refused.
 */
export function dateWindow(
  operation: MatchedOperation,
  now: number,
): { from: number; to: number } | { status: number; code: string; detail: string } {
  const names = operation.defines('fromBookingDate')
    ? (['fromBookingDate', 'toBookingDate'] as const)
    : (['fromTransactionDate', 'toTransactionDate'] as const);
  const [fromName, toName] = names;
  const from = operation.query[fromName];
  const to = operation.query[toName];
  if ((from === undefined) !== (to === undefined))
    return {
      status: 400,
      code: 'PARAMETRO_NAO_INFORMADO',
      detail: `${fromName} and ${toName} go together (the file: one must be sent when the other is)`,
    };
  const today = new Date(now).toISOString().slice(0, 10);
  const lower = Date.parse(`${from ?? today}T00:00:00Z`);
  const upper = Date.parse(`${to ?? today}T00:00:00Z`) + 86_400_000;
  if (!(upper > lower))
    return { status: 422, code: 'PARAMETRO_INVALIDO', detail: `${fromName} must not be after ${toName}` };
  return { from: lower, to: upper };
}

/** Logs an answer that broke the files and turns it into a 500: loud in tests, never shipped quietly. */
export function brokenAnswer(
  log: Logger,
  operation: MatchedOperation,
  problems: string[],
  now: number,
): Answer {
  log.error(
    { operation: operation.operationId, file: operation.file, problems: problems.slice(0, 5) },
    'consent bank: an answer does not meet the Open Finance file',
  );
  return errorAnswer(
    500,
    'ERRO_INTERNO',
    `the bank's answer does not meet ${operation.file} (${operation.operationId}): ${problems.slice(0, 3).join('; ')}`,
    now,
  );
}
