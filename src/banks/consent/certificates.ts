import { X509Certificate, createHash, createPrivateKey } from 'node:crypto';

/*
 * What the appliance must know about a client certificate and its key before it registers with a bank and
 * whenever `svc doctor` looks: that they parse, belong together, chain in order and are in date. Pure:
 * PEM in, facts out; no secret is ever part of a fact (a key only yields "matches").
 */

export interface CertificateFacts {
  /** RFC 4514 subject of the leaf, as `tls_client_auth_subject_dn` wants it. */
  subjectDn: string;
  issuerDn: string;
  notBefore: number;
  notAfter: number;
  /** Certificates in the file, leaf first. */
  chainLength: number;
  /** Null when each certificate is signed by the next; otherwise where the chain breaks. */
  chainProblem: string | null;
  /** Null when no key was given. */
  keyMatches: boolean | null;
}

const PEM_BLOCK = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

export class CertificateError extends Error {
  override name = 'CertificateError';
}

/**
 * Node prints a name one attribute a line, in the certificate's order (most significant first); RFC 4514,
 * which `tls_client_auth_subject_dn` uses, writes it the other way round with commas, escaping the
 * characters that would split it.
 */
export function rfc4514(nodeName: string): string {
  return nodeName
    .split('\n')
    .filter((line) => line !== '')
    .reverse()
    .map((line) => {
      const at = line.indexOf('=');
      const value = line.slice(at + 1).replace(/([,+"\\<>;])/g, '\\$1');
      return `${line.slice(0, at)}=${value}`;
    })
    .join(',');
}

/** Parses a PEM file's certificates (leaf first) and, if given, checks the key against the leaf. */
export function certificateFacts(certificatePem: string, privateKeyPem: string | null): CertificateFacts {
  const blocks = certificatePem.match(PEM_BLOCK) ?? [];
  if (blocks.length === 0) throw new CertificateError('the certificate file holds no PEM certificate');
  let chain: X509Certificate[];
  try {
    chain = blocks.map((block) => new X509Certificate(block));
  } catch {
    throw new CertificateError('a certificate in the file does not parse');
  }
  const leaf = chain[0]!;
  let chainProblem: string | null = null;
  for (let i = 0; i + 1 < chain.length; i++) {
    if (!chain[i]!.checkIssued(chain[i + 1]!) || !chain[i]!.verify(chain[i + 1]!.publicKey)) {
      chainProblem = `certificate ${i + 1} of ${chain.length} is not signed by the next one in the file`;
      break;
    }
  }
  let keyMatches: boolean | null = null;
  if (privateKeyPem !== null) {
    try {
      keyMatches = leaf.checkPrivateKey(createPrivateKey(privateKeyPem));
    } catch {
      throw new CertificateError('the private key does not parse (a PEM private key, unencrypted)');
    }
  }
  return {
    subjectDn: rfc4514(leaf.subject),
    issuerDn: rfc4514(leaf.issuer),
    notBefore: Date.parse(leaf.validFrom),
    notAfter: Date.parse(leaf.validTo),
    chainLength: chain.length,
    chainProblem,
    keyMatches,
  };
}

/** RFC 8705's `x5t#S256` of a certificate (the first in the PEM): the base64url SHA-256 of its DER. */
export function certificateThumbprint(cert: X509Certificate | string): string {
  const der = typeof cert === 'string' ? new X509Certificate(cert).raw : cert.raw;
  return createHash('sha256').update(der).digest('base64url');
}
