/* eslint-disable @typescript-eslint/no-explicit-any -- oidc-provider ships no types (oidc-provider.d.ts) */
import type { TLSSocket } from 'node:tls';
import { pageHeaders } from '../html/respond.js';
import type { BankProfile, ProfileParts, RefreshTokenPolicy, ShellContext } from './bank-profile.js';
import { PAGE_CSP } from './pages.js';
import { checkSoftwareStatement, directoryPublicKey } from './software-statement.js';
import { sameDn, subjectDnOf } from './test-ca.js';

/*
 * oidc-provider's configuration of a simulated bank: the settings both banks share, with the profile's merged
 * over them (features one level deep, so a feature such as RFC 7592's `registrationManagement` is one more
 * key in a profile or here). The bank applies what a client registered and no more: the library's defaults
 * for client metadata stand (RFC 7591: `grant_types` `authorization_code`; RFC 8705 section 3.4:
 * `tls_client_certificate_bound_access_tokens` false; RFC 9396 section 10.2: no `authorization_details_types`),
 * and the library enforces each (certificate binding at the token endpoint, unregistered RAR types as
 * `invalid_authorization_details`, unregistered grant types as `unauthorized_client`).
 */

export interface ProviderKeys {
  refreshTokens: RefreshTokenPolicy;
  signingJwk: Record<string, unknown>;
  cookieKey: string;
  adapter: unknown;
  /** oidc-provider's own `rotateRefreshToken`, which stands unless the `rotateRefreshTokens` fault is set. */
  libraryRotateRefreshToken: (ctx: unknown) => unknown;
}

/** `issueRefreshToken` of a policy; undefined keeps the library's own (OIDC Core section 11). */
function refreshTokenRule(policy: RefreshTokenPolicy) {
  if (policy === 'always')
    return async (_ctx: unknown, client: any) => client.grantTypeAllowed('refresh_token');
  if (policy === 'never') return async () => false;
  return undefined;
}

/** RFC 7591 section 2.3 software statements of the simulated directory, and the certificate they name. */
function statementValidator(context: ShellContext, parts: ProfileParts, directoryKeyPem: string) {
  const directoryKey = directoryPublicKey(directoryKeyPem);
  const { errors, clock } = context;
  return (ctx: any, key: string, value: unknown, metadata: any) => {
    if (key !== 'software_statement') return;
    // Stored clients were checked when they registered; the statement may have expired since.
    if (ctx?.oidc?.route !== 'registration') return;
    const check = checkSoftwareStatement(value, directoryKey, Math.floor(clock.now() / 1000));
    if (!check.ok) throw new errors.InvalidSoftwareStatement(check.reason);
    const { claims } = check;
    const cert = context.peerCertificate(ctx);
    if (!cert || !sameDn(subjectDnOf(cert.toString()), claims.tls_client_auth_subject_dn))
      throw new errors.UnapprovedSoftwareStatement(
        'the client certificate is not the one the software statement names',
      );
    if (
      metadata.token_endpoint_auth_method === 'tls_client_auth' &&
      (typeof metadata.tls_client_auth_subject_dn !== 'string' ||
        !sameDn(metadata.tls_client_auth_subject_dn, claims.tls_client_auth_subject_dn))
    )
      throw new errors.UnapprovedSoftwareStatement(
        'tls_client_auth_subject_dn must be the software statement’s',
      );
    for (const uri of metadata.redirect_uris ?? [])
      if (!claims.redirect_uris.includes(uri))
        throw new errors.InvalidRedirectUri('redirect_uris must be among the software statement’s');
    parts.registrationPolicy?.(metadata);
    metadata.client_name = claims.client_name;
  };
}

/** RFC 8705: the client certificate of the TLS connection, checked against the registration's subject DN. */
function mtlsFeature(context: ShellContext) {
  return {
    enabled: true,
    // Binds a token only for a client registered with tls_client_certificate_bound_access_tokens (section 3.4).
    certificateBoundAccessTokens: true,
    tlsClientAuth: true,
    getCertificate: (ctx: any) => context.peerCertificate(ctx),
    // The listener refuses any certificate the test CA did not issue (rejectUnauthorized).
    certificateAuthorized: (ctx: any) => (ctx.req.socket as TLSSocket).authorized === true,
    certificateSubjectMatches: (ctx: any, property: string, expected: string) => {
      const cert = context.peerCertificate(ctx);
      return (
        property === 'tls_client_auth_subject_dn' &&
        cert !== undefined &&
        sameDn(subjectDnOf(cert.toString()), expected)
      );
    },
  };
}

export function providerConfiguration(
  context: ShellContext,
  profile: BankProfile,
  parts: ProfileParts,
  keys: ProviderKeys & { directoryKeyPem: string },
): Record<string, any> {
  const { errors, mtlsBase, issuerPath, log } = context;
  const own = parts.provider;
  const issueRefreshToken = refreshTokenRule(keys.refreshTokens);
  const shared = {
    adapter: keys.adapter,
    jwks: { keys: [keys.signingJwk] },
    cookies: { keys: [keys.cookieKey] },
    routes: { pushed_authorization_request: '/par', registration: '/reg' },
    async findAccount(_ctx: unknown, sub: string) {
      return { accountId: sub, claims: async () => ({ sub }) };
    },
    pkce: { required: () => true },
    // The library's rule (rotate for public clients, or past 70% of the token's life) unless a fault rotates
    // at every refresh.
    rotateRefreshToken: (ctx: unknown) =>
      context.faults.bankWide.rotateRefreshTokens === true || keys.libraryRotateRefreshToken(ctx),
    ...(issueRefreshToken ? { issueRefreshToken } : {}),
    extraClientMetadata: {
      properties: ['software_statement'],
      validator: statementValidator(context, parts, keys.directoryKeyPem),
    },
    interactions: {
      url: (_ctx: unknown, interaction: any) => `${issuerPath}/interaction/${interaction.uid}`,
    },
    renderError: async (ctx: any, out: { error: string }) => {
      // The browser sees a page of the bank's, never the error's details (they may name a client).
      pageHeaders(ctx, PAGE_CSP);
      ctx.type = 'text/html; charset=utf-8';
      ctx.body = parts.pages.gone(parts.pages.pickLanguage(undefined, ctx.get('accept-language'))).toString();
      log.info({ error: out.error }, 'consent bank: browser request refused');
    },
  };
  const features = {
    pushedAuthorizationRequests: { enabled: true, requirePushedAuthorizationRequests: true },
    registration: { enabled: true },
    // RFC 7592 (read, update, delete at `/reg/{client_id}` with the registration access token), for
    // `svc banks rotate-certificate`. Each update issues a new token and ends the old one (§2.2 allows
    // it; the library's default): a client that does not keep the new one loses management at once.
    registrationManagement: { enabled: true, rotateRegistrationAccessToken: true },
    devInteractions: { enabled: false },
    // A client may ask whether its token is bound to its certificate.
    introspection: { enabled: true },
    revocation: { enabled: false },
    userinfo: { enabled: false },
    mTLS: mtlsFeature(context),
    // The resource APIs are one resource, the mTLS base; the library drops any scope its resource does not list.
    resourceIndicators: {
      enabled: true,
      defaultResource: () => mtlsBase,
      useGrantedResource: () => true,
      getResourceServerInfo: (ctx: any, resource: string) => {
        if (resource !== mtlsBase)
          throw new errors.InvalidTarget('the only resource is the bank’s mTLS base');
        return { scope: parts.resourceScopes(ctx), audience: mtlsBase, accessTokenFormat: 'opaque' };
      },
    },
  };
  const { features: ownFeatures, ...rest } = own;
  void profile;
  return { ...shared, ...rest, features: { ...features, ...ownFeatures } };
}
