import { Agent, request } from 'undici';
import { existsSync, lstatSync, readdirSync, statfsSync, statSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { join } from 'node:path';
import type { Database } from '../db/database.js';
import { SEALED_TABLES } from '../secrets/sealed-columns.js';
import type { SecretBox } from '../secrets/secret-box.js';
import { X509Certificate } from 'node:crypto';
import { hasTestCa, readTestCa } from '../consent-bank/test-ca.js';
import type { DataDirFacts, DiskFacts, MasterKeyFacts, PortFacts, SimulatedBankFacts } from './checks.js';

/**
 * The I/O behind `svc doctor`'s checks: each probe looks, changes nothing, and turns what it met into the
 * facts a pure check judges. Nothing here creates a file or sends a request beyond what the configuration
 * names (the API's own /health when its port is taken, a TCP connection to a configured gateway).
 */

/** The data directory and the modes of everything in it (symbolic links are left alone, as install does). */
export function probeDataDir(home: string): DataDirFacts {
  const facts: DataDirFacts = { home, exists: existsSync(home), isDirectory: false, loose: [], error: null };
  if (!facts.exists) return facts;
  facts.isDirectory = statSync(home).isDirectory();
  if (!facts.isDirectory) return facts;
  const walk = (path: string) => {
    const stat = lstatSync(path);
    if (stat.isSymbolicLink()) return;
    if ((stat.mode & 0o077) !== 0) facts.loose.push({ path, mode: stat.mode & 0o777 });
    if (stat.isDirectory()) for (const name of readdirSync(path)) walk(join(path, name));
  };
  try {
    walk(home);
  } catch (error) {
    facts.error = (error as Error).message;
  }
  return facts;
}

/** The key file's presence and mode; reading and parsing it is the caller's (loadSecretBox). */
export function probeMasterKeyFile(file: string): Pick<MasterKeyFacts, 'exists' | 'mode'> {
  if (!existsSync(file)) return { exists: false, mode: null };
  return { exists: true, mode: statSync(file).mode & 0o777 };
}

/**
 * Opens the first stored secret found with the box: a key file that is present and well formed but not the
 * one that sealed this database (a restore from the wrong backup) is found here and nowhere else before a
 * sync or a delivery fails. Refresh intents' MFA material is short-lived, so links and endpoints come first.
 */
export async function trySealedValue(db: Database, box: SecretBox): Promise<MasterKeyFacts['trial']> {
  for (const sealed of SEALED_TABLES) {
    if (sealed.table === 'idempotency_keys') continue; // its column holds sealed and plain answers alike
    for (const column of sealed.columns) {
      const row = (await db.reader(sealed.table).whereNotNull(column).first()) as
        Record<string, unknown> | undefined;
      if (!row) continue;
      const where = `${sealed.table}.${column}`;
      try {
        box.open(String(row[column]), sealed.context(row, column));
        return { kind: 'opened', where };
      } catch (error) {
        return { kind: 'failed', where, reason: (error as Error).message };
      }
    }
  }
  return { kind: 'nothing-stored' };
}

/** Whether `host:port` can be bound now, by binding it for a moment. */
export async function probeBind(host: string, port: number): Promise<'free' | 'in-use' | { error: string }> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      resolve(error.code === 'EADDRINUSE' ? 'in-use' : { error: error.code ?? error.message }),
    );
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve('free')));
  });
}

/** Whether what answers on the API port is svc's API: its /health says `{"status":"ok"}` (or "degraded"). */
export async function answersLikeOurApi(host: string, port: number): Promise<boolean> {
  const address = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
  try {
    const response = await fetch(`http://${address}:${port}/health`, { signal: AbortSignal.timeout(2000) });
    const body = (await response.json()) as { status?: unknown };
    return typeof body?.status === 'string';
  } catch {
    return false;
  }
}

export async function probePort(
  name: PortFacts['name'],
  setting: string,
  host: string,
  port: number,
  serve: { pids: number[]; isOurs: () => Promise<boolean> },
): Promise<PortFacts> {
  const facts: PortFacts = { name, setting, host, port, state: 'off', detail: null };
  if (port === 0) return facts;
  const bound = await probeBind(host, port);
  if (bound === 'free') return { ...facts, state: 'free' };
  if (bound !== 'in-use') return { ...facts, state: 'error', detail: bound.error };
  if (serve.pids.length > 0 && (await serve.isOurs()))
    return { ...facts, state: 'ours', detail: `supervisor pid ${serve.pids.join(', ')}` };
  return {
    ...facts,
    state: 'taken',
    detail: serve.pids.length > 0 ? 'not the svc serve of this home' : null,
  };
}

export function probeDisk(path: string): DiskFacts {
  try {
    const stats = statfsSync(path);
    return {
      path,
      freeBytes: stats.bavail * stats.bsize,
      totalBytes: stats.blocks * stats.bsize,
      error: null,
    };
  } catch (error) {
    return {
      path,
      freeBytes: null,
      totalBytes: null,
      error: (error as NodeJS.ErrnoException).code ?? String(error),
    };
  }
}

/** Opens (and closes) a TCP connection to a gateway's host and port; sends nothing. */
export async function probeTcp(
  url: string,
  timeoutMs = 2000,
): Promise<{ open: true } | { open: false; reason: string }> {
  const parsed = new URL(url);
  const port = Number(parsed.port || (parsed.protocol === 'https:' ? 443 : 80));
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (result: { open: true } | { open: false; reason: string }) => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(timeoutMs, () => done({ open: false, reason: `no answer within ${timeoutMs} ms` }));
    socket.once('connect', () => done({ open: true }));
    socket.once('error', (error: NodeJS.ErrnoException) =>
      done({ open: false, reason: error.code ?? error.message }),
    );
  });
}

/**
 * A bank's OpenID discovery document at its issuer, within 5 s, trusting the bank's own CA when the
 * registration holds one. Sends no credential: discovery is public.
 */
export async function probeDiscovery(registration: {
  issuer: string;
  server_ca_pem: string | null;
}): Promise<{ kind: 'ok' } | { kind: 'failed'; reason: string }> {
  const agent = new Agent({
    connect: { timeout: 5_000, ...(registration.server_ca_pem && { ca: registration.server_ca_pem }) },
  });
  try {
    const url = `${registration.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
    const answer = await request(url, { dispatcher: agent, headersTimeout: 5_000, bodyTimeout: 5_000 });
    const body = (await answer.body.json().catch(() => null)) as { issuer?: unknown } | null;
    if (answer.statusCode !== 200) return { kind: 'failed', reason: `HTTP ${answer.statusCode}` };
    if (body?.issuer !== registration.issuer)
      return { kind: 'failed', reason: 'its discovery document names another issuer' };
    return { kind: 'ok' };
  } catch (error) {
    return { kind: 'failed', reason: (error as Error).message };
  } finally {
    await agent.close();
  }
}

/** The simulated bank's test CA in `directory`: whether it is whole, and the dates of its certificates. */
export function probeTestCa(directory: string): SimulatedBankFacts['material'] {
  if (!hasTestCa(directory)) return { kind: 'missing' };
  try {
    const material = readTestCa(directory);
    const dates = (file: string, pem: string) => {
      const certificate = new X509Certificate(pem);
      return {
        file,
        notBefore: Date.parse(certificate.validFrom),
        notAfter: Date.parse(certificate.validTo),
      };
    };
    return {
      kind: 'ok',
      certificates: [
        dates('ca.pem', material.caCert),
        dates('server.pem', material.server.cert),
        dates('client.pem', material.client.cert),
      ],
    };
  } catch (error) {
    return {
      kind: 'unreadable',
      reason: (error as NodeJS.ErrnoException).code ?? 'a certificate does not parse',
    };
  }
}
