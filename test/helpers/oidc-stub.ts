// @peculiar/x509 registers its ASN.1 providers with tsyringe, which needs the Reflect metadata API first.
import 'reflect-metadata';
import {
  X509Certificate,
  constants,
  generateKeyPairSync,
  verify,
  webcrypto,
  type KeyObject,
} from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import * as x509 from '@peculiar/x509';
import { SignJWT } from 'jose';
import type { Test } from 'tap';

/*
 * A minimal authorization server for registration tests: oidc-provider 9 over HTTPS with client
 * certificates, Dynamic Client Registration on, `tls_client_auth`, and a software statement checked
 * against a test directory's key. Certificates come from a CA made here with @peculiar/x509. The
 * simulated consent bank (src/consent-bank/) replaces this once it lands; keep it small.
 */

x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);
const ALG = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY = 86_400_000;

export interface Pki {
  caPem: string;
  /** Leaf (client) certificate and its key, PEM. */
  issue(
    cn: string,
    options?: { notBefore?: Date; notAfter?: Date; server?: boolean },
  ): Promise<{ certPem: string; keyPem: string }>;
}

async function keyPem(key: webcrypto.CryptoKey): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', key));
  return `-----BEGIN PRIVATE KEY-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END PRIVATE KEY-----\n`;
}

export async function makePki(): Promise<Pki> {
  const caKeys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: '01',
    name: 'CN=Test CA, O=svc tests',
    notBefore: new Date(Date.now() - DAY),
    notAfter: new Date(Date.now() + 365 * DAY),
    keys: caKeys,
    signingAlgorithm: ALG,
    extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
  });
  let serial = 2;
  return {
    caPem: ca.toString('pem'),
    async issue(cn, options = {}) {
      const keys = await webcrypto.subtle.generateKey(ALG, true, ['sign', 'verify']);
      const cert = await x509.X509CertificateGenerator.create({
        serialNumber: (serial++).toString(16).padStart(2, '0'),
        subject: `CN=${cn}, O=svc tests`,
        issuer: ca.subject,
        notBefore: options.notBefore ?? new Date(Date.now() - DAY),
        notAfter: options.notAfter ?? new Date(Date.now() + 90 * DAY),
        publicKey: keys.publicKey,
        signingKey: caKeys.privateKey,
        signingAlgorithm: ALG,
        extensions: options.server
          ? [
              new x509.SubjectAlternativeNameExtension([
                { type: 'ip', value: '127.0.0.1' },
                { type: 'dns', value: 'localhost' },
              ]),
            ]
          : [],
      });
      return { certPem: cert.toString('pem'), keyPem: await keyPem(keys.privateKey) };
    },
  };
}

export interface OidcStub {
  issuer: string;
  pki: Pki;
  /** Signs a software statement as the test directory does (or as someone else, `forged`). */
  softwareStatement(claims?: Record<string, unknown>, forged?: boolean): Promise<string>;
  /** Client certificates' subjects seen by the server, in order (proves the client presented one). */
  presented: string[];
}

/** A PS256 JWS checked against `key`, with the directory as its issuer. */
function signedBy(jws: string, key: KeyObject): boolean {
  const [header, payload, signature] = jws.split('.');
  if (!header || !payload || !signature) return false;
  const ok = verify(
    'sha256',
    Buffer.from(`${header}.${payload}`),
    { key, padding: constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 },
    Buffer.from(signature, 'base64url'),
  );
  return ok && JSON.parse(Buffer.from(payload, 'base64url').toString()).iss === 'test-directory';
}

export async function startOidcStub(t: Test): Promise<OidcStub> {
  // Untyped package: imported by a name the compiler does not resolve, so this helper declares nothing
  // about it that the simulated bank's own declarations could contradict at the merge.
  const name = 'oidc-provider';
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const { default: Provider, errors: oidcErrors } = (await import(name)) as { default: any; errors: any };
  const pki = await makePki();
  const server = await pki.issue('localhost', { server: true });
  const directory = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const presented: string[] = [];
  const https: Server = createServer({
    key: server.keyPem,
    cert: server.certPem,
    ca: pki.caPem,
    requestCert: true,
    rejectUnauthorized: false,
  });
  await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
  const issuer = `https://127.0.0.1:${(https.address() as AddressInfo).port}`;
  const provider = new Provider(issuer, {
    clientAuthMethods: ['tls_client_auth'],
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      // The appliance registers client_credentials (Grant Management §6.1 needs such a token).
      clientCredentials: { enabled: true },
      mTLS: {
        enabled: true,
        tlsClientAuth: true,
        certificateBoundAccessTokens: true,
        getCertificate(ctx: { socket: unknown }) {
          const peer = (ctx.socket as TLSSocket).getPeerCertificate();
          return peer?.raw ? new X509Certificate(peer.raw) : undefined;
        },
      },
    },
    extraClientMetadata: {
      properties: ['software_statement'],
      // oidc-provider wants this synchronous, so the PS256 signature is checked with node:crypto directly.
      validator(_ctx: unknown, key: string, value: unknown) {
        if (key !== 'software_statement') return;
        if (typeof value !== 'string' || !signedBy(value, directory.publicKey))
          throw new oidcErrors.InvalidClientMetadata('software_statement signature is invalid');
      },
    },
  });
  https.on('request', (req, res) => {
    const peer = (req.socket as TLSSocket).getPeerCertificate();
    if (peer?.subject?.CN) presented.push(String(peer.subject.CN));
    void provider.callback()(req, res);
  });
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        https.closeAllConnections();
        https.close(() => resolve());
      }),
  );
  return {
    issuer,
    pki,
    presented,
    softwareStatement: (claims = {}, forged = false) =>
      new SignJWT({ software_id: 'svc-appliance', org_id: 'test-org', ...claims })
        .setProtectedHeader({ alg: 'PS256' })
        .setIssuer('test-directory')
        .setIssuedAt()
        .sign((forged ? stranger : directory).privateKey),
  };
}
