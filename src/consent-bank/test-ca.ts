import {
  X509Certificate as NodeX509,
  createHash,
  generateKeyPairSync,
  randomBytes,
  webcrypto,
} from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
// @peculiar/x509 registers its ASN.1 providers with tsyringe, which needs the Reflect metadata API first.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';

/*
 * The simulated consent bank's local test CA, made once at install (and by each test in a temp dir). Nothing
 * here is trusted outside test mode: the CA signs the bank's loopback server certificate and the appliance's
 * client certificate, and the directory key signs software statements as the CMF's participant directory
 * would. TLS keys are ECDSA P-256 (a key pair costs about 1 ms, against 50 to 500 ms for RSA-2048); the two
 * keys that sign JWTs are RSA-2048, since the Chilean draft names PS256.
 */

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;
const crypto = webcrypto;
x509.cryptoProvider.set(crypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const EC_SIGN = { name: 'ECDSA', hash: 'SHA-256' } as const;
const DAY_MS = 86_400_000;

export interface KeyAndCert {
  cert: string;
  key: string;
}

export interface TestCaMaterial {
  /** The CA's certificate (PEM): the trust anchor for both ends of the mTLS connection. */
  caCert: string;
  caKey: string;
  /** The bank's server certificate for 127.0.0.1 and localhost. */
  server: KeyAndCert;
  /** The appliance's client certificate; its subject DN is what a registration names. */
  client: KeyAndCert;
  /** The simulated directory's RSA key (PKCS#8 PEM) that signs software statements with PS256. */
  directoryKey: string;
  /** The bank's RSA key (PKCS#8 PEM) for its ID tokens. */
  bankSigningKey: string;
  /** 32 random bytes (hex): keys the bank's cookies and seals its stored state. */
  stateSecret: string;
}

/** The subject of the appliance's client certificate, as written when it is issued. */
export const APPLIANCE_CLIENT_SUBJECT = 'CN=svc appliance, O=svc sandbox, C=CL';
const CA_SUBJECT = 'CN=svc consent bank test CA, O=svc sandbox, C=CL';

function pem(label: string, der: ArrayBuffer): string {
  const body = Buffer.from(der).toString('base64').replace(/.{64}/g, '$&\n');
  return `-----BEGIN ${label}-----\n${body}${body.endsWith('\n') ? '' : '\n'}-----END ${label}-----\n`;
}

async function exportKey(key: CryptoKey): Promise<string> {
  return pem('PRIVATE KEY', await crypto.subtle.exportKey('pkcs8', key));
}

async function importCaKey(caKey: string): Promise<CryptoKey> {
  const der = Buffer.from(caKey.replace(/-----[^-]+-----|\s/g, ''), 'base64');
  return crypto.subtle.importKey('pkcs8', der, EC, false, ['sign']);
}

function serial(): string {
  // Positive (first bit clear) and 16 bytes: RFC 5280 allows up to 20.
  const bytes = randomBytes(16);
  bytes[0] = (bytes[0] ?? 0) & 0x7f;
  return bytes.toString('hex');
}

async function makeCa(
  now: number,
  subject: string,
): Promise<{ cert: x509.X509Certificate; keys: CryptoKeyPair }> {
  const keys = (await crypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: subject,
    notBefore: new Date(now - DAY_MS),
    notAfter: new Date(now + 10 * 365 * DAY_MS),
    signingAlgorithm: EC_SIGN,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert, keys };
}

/** A leaf certificate signed by the CA: a server one (for 127.0.0.1 and localhost) or a client one. */
async function issueLeaf(
  ca: { cert: string; key: string },
  subject: string,
  usage: 'server' | 'client',
  now: number,
): Promise<KeyAndCert> {
  const caCert = new x509.X509Certificate(ca.cert);
  const keys = (await crypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as CryptoKeyPair;
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
    new x509.ExtendedKeyUsageExtension([
      usage === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth,
    ]),
    await x509.AuthorityKeyIdentifierExtension.create(await caCert.publicKey.export(crypto)),
  ];
  if (usage === 'server')
    extensions.push(
      new x509.SubjectAlternativeNameExtension([
        { type: 'ip', value: '127.0.0.1' },
        { type: 'dns', value: 'localhost' },
      ]),
    );
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject,
    issuer: caCert.subject,
    notBefore: new Date(now - DAY_MS),
    notAfter: new Date(now + 2 * 365 * DAY_MS),
    signingAlgorithm: EC_SIGN,
    publicKey: keys.publicKey,
    signingKey: await importCaKey(ca.key),
    extensions,
  });
  return { cert: cert.toString('pem') + '\n', key: await exportKey(keys.privateKey) };
}

/** A client certificate from the CA for another subject (a second client in tests, a rotated one). */
export function issueClientCertificate(
  material: Pick<TestCaMaterial, 'caCert' | 'caKey'>,
  subject: string,
  now: number,
): Promise<KeyAndCert> {
  return issueLeaf({ cert: material.caCert, key: material.caKey }, subject, 'client', now);
}

function rsaKey(): string {
  return generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({
    type: 'pkcs8',
    format: 'pem',
  }) as string;
}

export async function makeTestCa(now: number): Promise<TestCaMaterial> {
  const ca = await makeCa(now, CA_SUBJECT);
  const caPair = { cert: ca.cert.toString('pem') + '\n', key: await exportKey(ca.keys.privateKey) };
  return {
    caCert: caPair.cert,
    caKey: caPair.key,
    server: await issueLeaf(caPair, 'CN=127.0.0.1, O=svc consent bank, C=CL', 'server', now),
    client: await issueLeaf(caPair, APPLIANCE_CLIENT_SUBJECT, 'client', now),
    directoryKey: rsaKey(),
    bankSigningKey: rsaKey(),
    stateSecret: randomBytes(32).toString('hex'),
  };
}

/**
 * A server certificate from another, throw-away CA: the "wrong certificate" fault presents it, so a client
 * that pins our CA must refuse the connection.
 */
export async function makeForeignServerCertificate(now: number): Promise<KeyAndCert> {
  const ca = await makeCa(now, 'CN=not the consent bank CA, O=elsewhere, C=CL');
  const caPair = { cert: ca.cert.toString('pem') + '\n', key: await exportKey(ca.keys.privateKey) };
  return issueLeaf(caPair, 'CN=127.0.0.1, O=not the consent bank, C=CL', 'server', now);
}

/** The file of each part under the CA's directory (`<home>/consent-bank/` after install). */
const FILES = {
  caCert: 'ca.pem',
  caKey: 'ca-key.pem',
  serverCert: 'server.pem',
  serverKey: 'server-key.pem',
  clientCert: 'client.pem',
  clientKey: 'client-key.pem',
  directoryKey: 'directory-key.pem',
  bankSigningKey: 'bank-signing-key.pem',
  stateSecret: 'state-secret',
} as const;

const PRIVATE = new Set<string>([
  FILES.caKey,
  FILES.serverKey,
  FILES.clientKey,
  FILES.directoryKey,
  FILES.bankSigningKey,
  FILES.stateSecret,
]);

export function testCaDirectory(home: string): string {
  return join(home, 'consent-bank');
}

/** Whether `directory` holds a whole set (`ensureTestCa` writes its secret last). */
export function hasTestCa(directory: string): boolean {
  return existsSync(join(directory, FILES.stateSecret));
}

/**
 * Makes the CA material in `directory` unless it is there already (install runs again on upgrades; a new CA
 * would orphan the client registered with the old one). Private keys are written 0600 in a 0700 directory,
 * like the master key file; each file is written whole then renamed, so a crash leaves no half key.
 */
export async function ensureTestCa(directory: string, now: number): Promise<{ created: boolean }> {
  if (hasTestCa(directory)) return { created: false };
  writeTestCa(directory, await makeTestCa(now));
  return { created: true };
}

/** Writes `material` as `ensureTestCa` does (tests write one CA made once into each data directory). */
export function writeTestCa(directory: string, material: TestCaMaterial): void {
  mkdirSync(directory, { recursive: true, mode: 0o700 });
  chmodSync(directory, 0o700);
  const contents: Record<string, string> = {
    [FILES.caCert]: material.caCert,
    [FILES.caKey]: material.caKey,
    [FILES.serverCert]: material.server.cert,
    [FILES.serverKey]: material.server.key,
    [FILES.clientCert]: material.client.cert,
    [FILES.clientKey]: material.client.key,
    [FILES.directoryKey]: material.directoryKey,
    [FILES.bankSigningKey]: material.bankSigningKey,
  };
  for (const [name, text] of Object.entries(contents)) writeWhole(join(directory, name), text);
  // The secret last: its presence says the set is complete.
  writeWhole(join(directory, FILES.stateSecret), material.stateSecret + '\n');
}

function writeWhole(path: string, text: string): void {
  const name = path.split('/').pop() ?? '';
  const temporary = `${path}.tmp-${process.pid}`;
  writeFileSync(temporary, text, { mode: PRIVATE.has(name) ? 0o600 : 0o644 });
  renameSync(temporary, path);
}

export function readTestCa(directory: string): TestCaMaterial {
  const read = (name: string) => readFileSync(join(directory, name), 'utf8');
  return {
    caCert: read(FILES.caCert),
    caKey: read(FILES.caKey),
    server: { cert: read(FILES.serverCert), key: read(FILES.serverKey) },
    client: { cert: read(FILES.clientCert), key: read(FILES.clientKey) },
    directoryKey: read(FILES.directoryKey),
    bankSigningKey: read(FILES.bankSigningKey),
    stateSecret: read(FILES.stateSecret).trim(),
  };
}

/**
 * A certificate's subject DN in one canonical form (RFC 4514 order as @peculiar/x509 prints it, e.g.
 * `CN=svc appliance, O=svc sandbox, C=CL`). Registration (`tls_client_auth_subject_dn`), the software
 * statement and the bank's check all use this form, so no two spellings of one DN meet.
 */
/**
 * The certificate's subject DN as RFC 4514 writes it (last RDN first), which is how a client names it in
 * `tls_client_auth_subject_dn` (RFC 8705) and so how the bank compares it. For the appliance's certificate:
 * `C=CL,O=svc sandbox,CN=svc appliance` (its name was written most significant first).
 */
export function subjectDnOf(certPem: string): string {
  return rfc4514(new NodeX509(certPem).subject);
}

/** Canonical comparison of two DN spellings: attribute names upper-case, no space around separators. */
export function sameDn(a: string, b: string): boolean {
  const canonical = (dn: string) =>
    dn
      .split(/\s*,\s*/)
      .map((part) => {
        const at = part.indexOf('=');
        return `${part.slice(0, at).trim().toUpperCase()}=${part.slice(at + 1).trim()}`;
      })
      .join(',');
  return canonical(a) === canonical(b);
}

/**
 * RFC 8705 section 3.1: `x5t#S256`, the base64url SHA-256 of the certificate's DER, as the bank binds a token
 * to the certificate it was issued over (oidc-provider computes the same when it binds).
 */
export function certificateThumbprint(cert: NodeX509 | string): string {
  const der = typeof cert === 'string' ? new NodeX509(cert).raw : cert.raw;
  return createHash('sha256').update(der).digest('base64url');
}

/** Node's multi-line subject (`C=CL\nO=…\nCN=…`, most significant first) as RFC 4514 writes it. */
function rfc4514(nodeName: string): string {
  return nodeName
    .split('\n')
    .filter((line) => line !== '')
    .reverse()
    .map((line) => {
      const at = line.indexOf('=');
      return `${line.slice(0, at)}=${line.slice(at + 1).replace(/([,+"\\<>;])/g, '\\$1')}`;
    })
    .join(',');
}
