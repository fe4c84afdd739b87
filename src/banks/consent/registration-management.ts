import { randomBytes } from 'node:crypto';
import * as client from 'openid-client';
import type { Database } from '../../db/database.js';
import { errors } from '../../errors/api-error.js';
import type { SecretBox } from '../../secrets/secret-box.js';
import { certificateFacts, certificateThumbprint } from './certificates.js';
import { gatedFetch } from '../budget/bank-calls.js';
import { mtlsAgent, mtlsFetch, type ClientIdentity, type MtlsFetch } from './mtls.js';
import { checkClientCertificate, isLoopbackHttp } from './register.js';
import {
  findRegistration,
  openPrivateKey,
  publicRegistration,
  recordCertificateChange,
  type CertificateChange,
  type ConsentClientRow,
} from './registrations.js';

/*
 * `svc banks rotate-certificate`: a new client certificate for a registration without a new client. A new
 * client (registering again) would strand every grant issued to the old client id, so every consent link of
 * the bank would have to be renewed by its user; Dynamic Client Registration Management (RFC 7592) changes
 * the registered `tls_client_auth_subject_dn` of the same client instead, and the grants stay.
 *
 * The steps, each reported with its outcome:
 *   check    the new certificate and key, locally (as `svc banks register` checks them); nothing is called
 *   read     RFC 7592 §2.1: GET the client at its registration_client_uri, the registration access token
 *            as Bearer, over mTLS
 *   update   RFC 7592 §2.2: PUT the metadata as read, with the new subject DN
 *   store    the bank's answer (a rotated registration access token first of all: the old one stops the
 *            moment the bank issues it), the certificate and the sealed key, on the same row
 *   verify   over mTLS with the new certificate: discovery, then a token endpoint call that only an
 *            authenticated client gets past (a refresh with a made-up token: `invalid_grant`, not
 *            `invalid_client`)
 *   rollback when verify failed: PUT the old subject DN back (RFC 7592 §2.2 again)
 *   restore  and the old certificate and key back on the row, with whatever token the bank gave last
 * A refusal at read or update changes nothing anywhere. The calls to the registration endpoint present the
 * current certificate while it can be used (in date, its key opens and matches) and the bank answers to it,
 * else the new one: a certificate that already expired, or that the bank stopped taking, is refused in the
 * TLS handshake, and RFC 7592 authenticates those calls by the registration access token anyway.
 */

export type StepName = 'check' | 'read' | 'update' | 'store' | 'verify' | 'rollback' | 'restore';

export interface RotationStep {
  step: StepName;
  outcome: 'ok' | 'failed' | 'skipped';
  /** What happened, in the appliance's words; never a token or a key. */
  detail: string;
}

/**
 * `rotated`: the bank expects the new certificate and it works. `refused`: the bank refused the read or the
 * update; nothing changed. `rolled_back`: the update went through but the new certificate did not work;
 * the bank expects the old one again and the row keeps it. `rollback_failed`: that undoing failed too; the
 * row holds what the bank has (the new certificate).
 */
export type RotationOutcome = 'rotated' | 'refused' | 'rolled_back' | 'rollback_failed';

export interface RotationReport {
  bank_id: string;
  mode: 'live' | 'test';
  /** The registration's row (`consent_clients.id`) and client id: the same before and after. */
  registration_id: string;
  client_id: string;
  outcome: RotationOutcome;
  previous_subject_dn: string;
  subject_dn: string;
  /** When the certificate the registration now holds ends (ms since the epoch). */
  certificate_expires_at: number;
  steps: RotationStep[];
}

export interface RotationInput {
  bankId: string;
  mode: 'live' | 'test';
  certificatePem: string;
  privateKeyPem: string;
  /**
   * A new software statement to send in the update instead of the one the bank holds. RFC 7592 does not ask
   * for one; a bank whose directory signs statements per certificate may want a fresh one with a new DN.
   */
  softwareStatement?: string | null;
}

export interface RotationContext {
  db: Database;
  secrets: SecretBox;
  now: () => number;
  /** Per call to the bank; the draft's budget is 4 s for data, registration gets the register's 10 s. */
  timeoutMs?: number;
}

/** RFC 7592 §2.2: an update request "MUST NOT include" these. */
export const NOT_SENT_IN_UPDATE = [
  'registration_access_token',
  'registration_client_uri',
  'client_secret_expires_at',
  'client_id_issued_at',
] as const;

const JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/**
 * The body of the RFC 7592 §2.2 update: every field of the client as the bank last returned it (a field
 * left out is a request to delete it, §2.2), with its `client_id` (required, and the same), the new
 * `tls_client_auth_subject_dn`, and, when given, a new software statement; without the four fields §2.2
 * forbids, and without `client_secret` (optional in the request, and a `tls_client_auth` client has none).
 */
export function updateBody(
  current: Record<string, unknown>,
  change: { clientId: string; subjectDn: string; softwareStatement?: string | null },
): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(current)) {
    if ((NOT_SENT_IN_UPDATE as readonly string[]).includes(key) || key === 'client_secret') continue;
    body[key] = value;
  }
  body.client_id = change.clientId;
  body.tls_client_auth_subject_dn = change.subjectDn;
  if (change.softwareStatement) body.software_statement = change.softwareStatement.trim();
  return body;
}

/** One spelling of a DN to compare by: attribute types upper-case, no space around the separators. */
function canonicalDn(dn: string): string {
  return dn
    .split(/(?<!\\),/)
    .map((part) => {
      const at = part.indexOf('=');
      return `${part.slice(0, at).trim().toUpperCase()}=${part.slice(at + 1).trim()}`;
    })
    .join(',');
}

export function sameSubjectDn(a: unknown, b: string): boolean {
  return typeof a === 'string' && canonicalDn(a) === canonicalDn(b);
}

/** Why a client read (§2.1) cannot be updated as this command does, or null. */
export function readProblem(answer: Record<string, unknown>, clientId: string): string | null {
  if (answer.client_id !== clientId) return 'the bank answered with another client id';
  if (answer.token_endpoint_auth_method !== 'tls_client_auth')
    return `the client authenticates with ${String(answer.token_endpoint_auth_method ?? 'no method')}, not tls_client_auth`;
  return null;
}

/** Why an update's answer (§2.2) does not show the change asked for, or null. */
export function updateProblem(
  answer: Record<string, unknown>,
  clientId: string,
  subjectDn: string,
): string | null {
  if (answer.client_id !== clientId) return 'the bank answered with another client id';
  if (!sameSubjectDn(answer.tls_client_auth_subject_dn, subjectDn))
    return `the bank's answer names subject DN ${String(answer.tls_client_auth_subject_dn)}, not ${subjectDn}`;
  return null;
}

type Answer = { ok: true; body: Record<string, unknown> } | { ok: false; said: string; answered: boolean };

/** The bank's words, cut short, without the token in case the bank echoed it. */
function bankWords(text: string, secret: string): string {
  return text.split(secret).join('****').slice(0, 300);
}

/** The network's reason for a call that got no HTTP answer. */
function noAnswer(error: unknown): string {
  const e = error as { name?: string; code?: string; cause?: { code?: string; cause?: { code?: string } } };
  if (e?.name === 'TimeoutError' || e?.name === 'AbortError') return 'no answer in time';
  return e?.cause?.cause?.code ?? e?.cause?.code ?? e?.code ?? 'no answer';
}

/** One RFC 7592 call: the registration access token as Bearer (§2), JSON in and out, within the budget. */
async function manage(
  fetch: MtlsFetch,
  method: 'GET' | 'PUT',
  uri: string,
  token: string,
  timeoutMs: number,
  body?: Record<string, unknown>,
): Promise<Answer> {
  let response: Response;
  let text: string;
  try {
    response = await fetch(uri, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        accept: 'application/json',
        ...(body ? { 'content-type': 'application/json' } : {}),
      },
      ...(body ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(timeoutMs),
    });
    text = await response.text();
  } catch (error) {
    return { ok: false, said: noAnswer(error), answered: false };
  }
  let parsed: unknown = null;
  try {
    parsed = JSON.parse(text);
  } catch {
    // said below
  }
  const object =
    parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : null;
  if (response.status === 200 && object) return { ok: true, body: object };
  let said = `HTTP ${response.status}`;
  if (object && typeof object.error === 'string')
    said += ` ${object.error}${typeof object.error_description === 'string' ? `: ${object.error_description}` : ''}`;
  else if (response.status === 200) said += ', not a JSON object';
  return { ok: false, said: bankWords(said, token), answered: true };
}

/** Token endpoint errors that only a client the bank authenticated can get (RFC 6749 §5.2). */
const AUTHENTICATED = new Set(['invalid_grant', 'unauthorized_client', 'unsupported_grant_type']);

/**
 * Whether the bank takes `identity` as the registered client: discovery over mTLS, then a refresh with a
 * made-up refresh token at the token endpoint. An authenticated client is told `invalid_grant`; one the bank
 * does not authenticate (another subject DN, a certificate it does not trust) `invalid_client`, or the TLS
 * handshake fails. Nothing is issued and no grant is touched.
 */
export async function verifyClientCertificate(
  row: Pick<ConsentClientRow, 'issuer' | 'client_id' | 'server_ca_pem'>,
  identity: Pick<ClientIdentity, 'certificatePem' | 'privateKeyPem'>,
  timeoutMs = 10_000,
): Promise<{ ok: true; detail: string } | { ok: false; detail: string }> {
  const agent = mtlsAgent({ ...identity, serverCaPem: row.server_ca_pem }, timeoutMs);
  try {
    let configuration: client.Configuration;
    try {
      configuration = await client.discovery(
        new URL(row.issuer),
        row.client_id,
        { use_mtls_endpoint_aliases: true },
        client.TlsClientAuth(),
        {
          [client.customFetch]: gatedFetch(mtlsFetch(agent)) as client.CustomFetch,
          timeout: Math.ceil(timeoutMs / 1000),
          // Only the simulated bank's issuer can be loopback http: registration refuses it for any other.
          ...(isLoopbackHttp(row.issuer) ? { execute: [client.allowInsecureRequests] } : {}),
        },
      );
    } catch (error) {
      return { ok: false, detail: `discovery failed: ${oauthWords(error)}` };
    }
    try {
      await client.refreshTokenGrant(configuration, `rotation-probe-${randomBytes(16).toString('hex')}`);
    } catch (error) {
      const said = oauthWords(error);
      const code = oauthError(error);
      if (code !== null && AUTHENTICATED.has(code))
        return {
          ok: true,
          detail: `the token endpoint authenticated the client over mTLS with this certificate (a made-up refresh token: ${code})`,
        };
      return {
        ok: false,
        detail:
          code === null
            ? `the token endpoint did not answer over mTLS with this certificate (${said}): the bank does not take it in the TLS handshake, or cannot be reached`
            : `the token endpoint did not take this certificate: ${said}`,
      };
    }
    return {
      ok: true,
      detail: 'the token endpoint authenticated the client over mTLS with this certificate',
    };
  } finally {
    await agent.close();
  }
}

/** The OAuth error code of an openid-client failure: a body's `error`, or a 401's WWW-Authenticate one. */
function oauthError(error: unknown): string | null {
  if (error instanceof client.ResponseBodyError) return error.error;
  if (error instanceof client.WWWAuthenticateChallengeError) {
    const challenge = error.cause[0];
    return typeof challenge?.parameters.error === 'string' ? challenge.parameters.error : null;
  }
  return null;
}

function oauthWords(error: unknown): string {
  const code = oauthError(error);
  if (error instanceof client.ResponseBodyError)
    return `HTTP ${error.status} ${code}${error.error_description ? `: ${error.error_description.slice(0, 200)}` : ''}`;
  if (error instanceof client.WWWAuthenticateChallengeError)
    return `HTTP ${error.status} ${code ?? ''}`.trim();
  const cause = (error as { cause?: unknown })?.cause;
  return noAnswer(cause && typeof cause === 'object' && 'code' in cause ? cause : error);
}

/** The current certificate as an mTLS identity when it can still make a handshake; null otherwise. */
function usableIdentity(row: ConsentClientRow, secrets: SecretBox, now: number): ClientIdentity | null {
  try {
    const privateKeyPem = openPrivateKey(row, secrets);
    const facts = certificateFacts(row.certificate_pem, privateKeyPem);
    if (!facts.keyMatches || facts.notBefore > now || facts.notAfter <= now) return null;
    return { certificatePem: row.certificate_pem, privateKeyPem, serverCaPem: row.server_ca_pem };
  } catch {
    return null;
  }
}

/** The refusals that come before any call to the bank, as the project's errors. */
function checkBeforeCalling(
  input: RotationInput,
  row: ConsentClientRow | undefined,
  now: number,
): { row: ConsentClientRow; subjectDn: string; notAfter: number; uri: string } {
  const facts = checkClientCertificate(input.certificatePem, input.privateKeyPem, now);
  if (input.softwareStatement != null && !JWS.test(input.softwareStatement.trim()))
    throw errors.invalidParameter(
      'software-statement',
      'The software statement is not a signed JWT (three base64url parts separated by dots).',
    );
  if (!row)
    throw errors.notFound(
      `The appliance is not registered with ${input.bankId} in ${input.mode} mode: svc banks registrations lists the registrations, svc banks register makes one.`,
      'bank',
    );
  const how = `Register again with the new certificate (svc banks register ${row.bank_id} --mode ${row.mode} … --cert NEW.pem --key NEW.key): that makes a new client, and every consent link of ${row.bank_id} in ${row.mode} mode must then be renewed by its user.`;
  if (!row.registration_client_uri || row.registration_access_token_sealed === null)
    throw errors.badRequest(
      'registration_not_manageable',
      `${row.bank_id} (${row.mode} mode) does not offer client management (RFC 7592): its registration answer gave no ${
        row.registration_client_uri ? 'registration access token' : 'registration_client_uri'
      }, so the client's certificate cannot be changed in place. ${how}`,
    );
  if (!row.registration_client_uri.startsWith('https://'))
    throw errors.badRequest(
      'registration_not_manageable',
      `${row.bank_id} (${row.mode} mode) named a registration_client_uri that is not https://: the registration access token is not sent there. ${how}`,
    );
  if (certificateThumbprint(input.certificatePem) === certificateThumbprint(row.certificate_pem))
    throw errors.invalidParameter('cert', 'This is the certificate the registration already holds.');
  return { row, subjectDn: facts.subjectDn, notAfter: facts.notAfter, uri: row.registration_client_uri };
}

const day = (ms: number) => new Date(ms).toISOString().slice(0, 10);

/**
 * Rotates the client certificate of the registration of `input.bankId` in `input.mode` (module comment).
 * Throws the project's error for what is refused before any call; from the first call on, answers a report
 * whose outcome says how it ended.
 */
export async function rotateCertificate(
  context: RotationContext,
  input: RotationInput,
): Promise<RotationReport> {
  const { db, secrets } = context;
  const timeoutMs = context.timeoutMs ?? 10_000;
  const checked = checkBeforeCalling(
    input,
    await findRegistration(db.knex, input.bankId, input.mode),
    context.now(),
  );
  const { row, subjectDn, uri } = checked;
  const previous = certificateFacts(row.certificate_pem, null);
  const sameDn = sameSubjectDn(previous.subjectDn, subjectDn);
  const steps: RotationStep[] = [];
  const step = (name: StepName, outcome: RotationStep['outcome'], detail: string) =>
    steps.push({ step: name, outcome, detail });
  const report = (outcome: RotationOutcome, holdsNew: boolean): RotationReport => ({
    bank_id: row.bank_id,
    mode: row.mode,
    registration_id: row.id,
    client_id: row.client_id,
    outcome,
    previous_subject_dn: previous.subjectDn,
    subject_dn: holdsNew ? subjectDn : previous.subjectDn,
    certificate_expires_at: holdsNew ? checked.notAfter : previous.notAfter,
    steps,
  });
  step(
    'check',
    'ok',
    `new certificate ${subjectDn}${sameDn ? ' (the same subject DN)' : ''}, valid until ${day(checked.notAfter)}; its key matches; its chain is in order`,
  );

  // The registration access token: replaced by each one the bank issues (§2.2: the old one is discarded).
  let token: string;
  try {
    token = secrets.open(row.registration_access_token_sealed!, row.id);
  } catch {
    throw errors.badRequest(
      'registration_unreadable',
      `The registration access token of ${row.bank_id} (${row.mode} mode) cannot be opened with this master key: svc doctor checks the master key.`,
    );
  }

  // Each write moves updated_at, even within one millisecond: other processes reopen their client on it.
  let stamp = Number(row.updated_at);
  const save = (
    certificate: Pick<CertificateChange, 'certificate_pem' | 'private_key_sealed'>,
    answer: Record<string, unknown>,
  ) =>
    db
      .transaction((trx) =>
        recordCertificateChange(trx, row.id, {
          ...certificate,
          ...fromAnswer(answer, token, row, secrets),
          updated_at: (stamp = Math.max(context.now(), stamp + 1)),
        }),
      )
      .then(
        (found) => (found ? null : 'the registration was replaced meanwhile (svc banks register)'),
        (error: unknown) => `the database refused the write (${(error as Error).message.slice(0, 200)})`,
      );
  const current = { certificate_pem: row.certificate_pem, private_key_sealed: row.private_key_sealed };

  const newIdentity: ClientIdentity = {
    certificatePem: input.certificatePem,
    privateKeyPem: input.privateKeyPem,
    serverCaPem: row.server_ca_pem,
  };
  const oldIdentity = usableIdentity(row, secrets, context.now());
  let agent = mtlsAgent(oldIdentity ?? newIdentity, timeoutMs);
  let fetch = gatedFetch(mtlsFetch(agent));
  let presenting = oldIdentity
    ? 'the current certificate'
    : 'the new certificate: the current one is out of date or its key does not open';
  try {
    // §2.1: the client as the bank holds it now, the base of the update.
    let read = await manage(fetch, 'GET', uri, token, timeoutMs);
    if (!read.ok && !read.answered && oldIdentity) {
      // No answer with the current certificate (the bank no longer takes it in the handshake, e.g. after a
      // rollback that failed): once more with the new one. RFC 7592 authenticates by the token anyway.
      await agent.close();
      agent = mtlsAgent(newIdentity, timeoutMs);
      fetch = gatedFetch(mtlsFetch(agent));
      presenting = `the new certificate: the current one got ${read.said}`;
      read = await manage(fetch, 'GET', uri, token, timeoutMs);
    }
    const readIssue = read.ok ? readProblem(read.body, row.client_id) : null;
    if (!read.ok || readIssue) {
      step(
        'read',
        'failed',
        `RFC 7592 §2.1 read ${read.ok ? `answered, but ${readIssue}` : `${read.answered ? 'refused' : 'failed'}: ${read.said}`}; nothing changed`,
      );
      return report('refused', false);
    }
    step(
      'read',
      'ok',
      `RFC 7592 §2.1: client ${row.client_id}, subject DN ${String(read.body.tls_client_auth_subject_dn)} (presenting ${presenting})`,
    );

    // §2.2: the same metadata with the new subject DN.
    let updated = await manage(
      fetch,
      'PUT',
      uri,
      token,
      timeoutMs,
      updateBody(read.body, {
        clientId: row.client_id,
        subjectDn,
        softwareStatement: input.softwareStatement,
      }),
    );
    if (!updated.ok && !updated.answered && !sameDn) {
      // No answer: the bank may have applied it. Read back once (a rotated token would make this fail).
      const after = await manage(fetch, 'GET', uri, token, timeoutMs);
      if (after.ok && updateProblem(after.body, row.client_id, subjectDn) === null) updated = after;
      else if (!after.ok) {
        step(
          'update',
          'failed',
          `RFC 7592 §2.2 update got ${updated.said}, and reading the client back failed (${after.said}): whether the bank took the new subject DN is unknown. Run svc banks rotate-certificate again; if the bank refuses the registration access token, ask the bank which certificate it expects`,
        );
        return report('refused', false);
      }
    }
    if (!updated.ok) {
      step(
        'update',
        'failed',
        `RFC 7592 §2.2 update ${updated.answered ? 'refused' : 'failed'}: ${updated.said}; nothing changed`,
      );
      return report('refused', false);
    }
    let latest = updated.body;
    const rotatedToken =
      typeof latest.registration_access_token === 'string' && latest.registration_access_token !== token;
    if (typeof latest.registration_access_token === 'string') token = latest.registration_access_token;
    const newToken = rotatedToken ? '; it issued a new registration access token' : '';
    const updateIssue = updateProblem(latest, row.client_id, subjectDn);
    if (updateIssue) {
      // The bank answered but did not take the change: its answer (and a new token) is kept, not the certificate.
      const kept = await save(current, latest);
      step('update', 'failed', `RFC 7592 §2.2: ${updateIssue}${newToken}; the current certificate is kept`);
      if (kept) step('store', 'failed', kept);
      return report('refused', false);
    }
    step('update', 'ok', `RFC 7592 §2.2: the bank now expects ${subjectDn}${newToken}`);

    // Stored at once, before anything else can fail: a rotated token is the only one that works now.
    const stored = await save(
      {
        certificate_pem: input.certificatePem,
        private_key_sealed: secrets.seal(input.privateKeyPem, row.id),
      },
      latest,
    );
    if (stored === null) {
      step(
        'store',
        'ok',
        `certificate, sealed key${rotatedToken ? ', the new registration access token' : ''} and the bank's answer on registration ${row.id} (client id ${row.client_id} unchanged)`,
      );
      // As the appliance's next call will: the new certificate, over mTLS.
      const verified = await verifyClientCertificate(row, newIdentity, timeoutMs);
      step('verify', verified.ok ? 'ok' : 'failed', verified.detail);
      if (verified.ok) return report('rotated', true);
    } else {
      step('store', 'failed', stored);
      step('verify', 'skipped', 'the new certificate is not stored: the change is undone at the bank');
    }

    // Undo: the old subject DN back at the bank, from the metadata it last returned (§2.2).
    if (sameDn) step('rollback', 'skipped', 'the bank names the same subject DN for both certificates');
    else {
      const back = await manage(
        fetch,
        'PUT',
        typeof latest.registration_client_uri === 'string' ? latest.registration_client_uri : uri,
        token,
        timeoutMs,
        updateBody(latest, {
          clientId: row.client_id,
          subjectDn: previous.subjectDn,
          softwareStatement:
            typeof read.body.software_statement === 'string' ? read.body.software_statement : null,
        }),
      );
      if (back.ok && typeof back.body.registration_access_token === 'string')
        token = back.body.registration_access_token;
      const backIssue = back.ok ? updateProblem(back.body, row.client_id, previous.subjectDn) : back.said;
      if (backIssue) {
        // The row keeps what the bank expects (the new certificate), with the token it gave last.
        if (stored === null && back.ok)
          await save(
            {
              certificate_pem: input.certificatePem,
              private_key_sealed: secrets.seal(input.privateKeyPem, row.id),
            },
            back.body,
          );
        step(
          'rollback',
          'failed',
          `RFC 7592 §2.2 putting ${previous.subjectDn} back failed: ${backIssue}. The bank expects ${subjectDn}, and the registration ${
            stored === null
              ? 'holds the new certificate'
              : 'still holds the current one, which the bank no longer takes'
          }: run svc banks rotate-certificate ${row.bank_id} --mode ${row.mode} with a certificate the bank takes (the previous one puts its subject DN back)`,
        );
        return report('rollback_failed', stored === null);
      }
      latest = (back as { body: Record<string, unknown> }).body;
      step('rollback', 'ok', `RFC 7592 §2.2: the bank expects ${previous.subjectDn} again`);
    }
    const restored = await save(current, latest);
    step(
      'restore',
      restored ? 'failed' : 'ok',
      restored ?? `the current certificate and key are back on registration ${row.id}`,
    );
    return report('rolled_back', false);
  } finally {
    await agent.close();
  }
}

/** What a registration row keeps of the bank's RFC 7592 answer: the token sealed, the URI, the rest in clear. */
function fromAnswer(
  answer: Record<string, unknown>,
  token: string,
  row: ConsentClientRow,
  secrets: SecretBox,
): Pick<CertificateChange, 'registration_access_token_sealed' | 'registration_client_uri' | 'registration'> {
  return {
    registration_access_token_sealed: secrets.seal(token, row.id),
    registration_client_uri:
      typeof answer.registration_client_uri === 'string'
        ? answer.registration_client_uri
        : row.registration_client_uri,
    registration: JSON.stringify(publicRegistration(answer)),
  };
}
