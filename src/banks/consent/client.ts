import * as client from 'openid-client';
import type { Agent } from 'undici';
import type { Knex } from 'knex';
import type { SecretBox } from '../../secrets/secret-box.js';
import { isLoopbackHttp } from './register.js';
import { mtlsAgent, mtlsFetch } from './mtls.js';
import { gatedFetch } from '../budget/bank-calls.js';
import { createAnswerChecker, type AnswerChecker } from './data-schemas.js';
import { findRegistration, openPrivateKey, openSigningKey, type ConsentClientRow } from './registrations.js';
import { signingKeyOf } from './request-signing.js';
import { consentProfileOf, findInstitution, type Institution } from '../institutions.js';
import type { ConsentClient, CountryProfile, ResponseShape } from './profile.js';
import { profileOf } from './profiles/index.js';

/*
 * The appliance as a registered client of one consent bank: openid-client's Configuration for the
 * registration (discovered from the bank's issuer, `tls_client_auth`, mTLS endpoint aliases) and the mTLS
 * fetch that every call to the bank goes through (PAR, token, Grant Management, resources). Opening one
 * costs a discovery round trip and a TLS handshake, so a process keeps one per registration and opens a new
 * one only when the registration changes (`svc banks register` again replaces the row and its `updated_at`).
 */

export type { ConsentClient } from './profile.js';

export interface ConsentClientOptions {
  /** Connect and answer budget of one call; the CMF's draft gives a bank 4 s to answer. */
  timeoutMs?: number;
  /** The banks a registration may be of (`institutionsOf(config)`); the built-in ones when left out. */
  institutions?: readonly Institution[];
}

/** A registration's country profile: its bank's, Chile's draft for a bank no longer listed. */
export function profileOfRegistration(
  row: ConsentClientRow,
  institutions?: readonly Institution[],
): CountryProfile {
  const institution = findInstitution(row.bank_id, institutions);
  return profileOf(institution ? consentProfileOf(institution).security : 'fapi2-cl');
}

/**
 * The client authentication the registration holds (RFC 7591 §2 `token_endpoint_auth_method`, as the bank
 * answered it): `private_key_jwt` signs a client assertion with the signing key (RFC 7523 §2.2, OpenID
 * Connect Core §9, PS256 as the key is RSA-PSS); anything else is `tls_client_auth` (RFC 8705 §2.1.1).
 */
export function clientAuthOf(row: ConsentClientRow, signingKey: client.PrivateKey | null): client.ClientAuth {
  const registered = (JSON.parse(row.registration) as { token_endpoint_auth_method?: unknown })
    .token_endpoint_auth_method;
  if (registered === 'private_key_jwt') {
    if (!signingKey) throw new Error('the registration uses private_key_jwt but holds no signing key');
    return client.PrivateKeyJwt(signingKey);
  }
  return client.TlsClientAuth();
}

/** Tells openid-client how the callback's answer comes (JARM, or `code id_token` with detached signature). */
function applyResponseShape(configuration: client.Configuration, shape: ResponseShape | { refused: string }) {
  if (shape === 'jarm') client.useJwtResponseMode(configuration);
  if (shape === 'hybrid') {
    client.useCodeIdTokenResponseType(configuration);
    // FAPI 1.0 Advanced §5.2.2.1: the ID token is a detached signature; `s_hash` must cover the state.
    client.enableDetachedSignatureResponseChecks(configuration);
  }
}

async function open(
  row: ConsentClientRow,
  secrets: SecretBox,
  options: ConsentClientOptions,
): Promise<{ consentClient: ConsentClient; agent: Agent }> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  const agent = mtlsAgent(
    {
      certificatePem: row.certificate_pem,
      privateKeyPem: openPrivateKey(row, secrets),
      serverCaPem: row.server_ca_pem,
    },
    timeoutMs,
  );
  // Each call asks the calling context's permit first (banks/budget/bank-calls.ts); a sync asks its own. Not the
  // discovery document: it is public metadata, not an API call the bank's limits count, and it is read once
  // when a process opens the client, whichever sync or trip happens to be first.
  const ungated = mtlsFetch(agent);
  const fetch = gatedFetch(ungated);
  const profile = profileOfRegistration(row, options.institutions);
  try {
    const signingPem = profile.signsRequests ? openSigningKey(row, secrets) : null;
    const signingKey = signingPem ? await signingKeyOf(signingPem) : null;
    const configuration = await client.discovery(
      new URL(row.issuer),
      row.client_id,
      { use_mtls_endpoint_aliases: true, ...profile.clientMetadata },
      clientAuthOf(row, signingKey),
      {
        [client.customFetch]: ungated as client.CustomFetch,
        timeout: Math.ceil(timeoutMs / 1000),
        // Only the simulated bank's issuer can be loopback http: registration refuses it for any other.
        ...(isLoopbackHttp(row.issuer) ? { execute: [client.allowInsecureRequests] } : {}),
      },
    );
    configuration[client.customFetch] = fetch as client.CustomFetch;
    const responseShape = profile.responseShape(configuration.serverMetadata());
    applyResponseShape(configuration, responseShape);
    return {
      agent,
      consentClient: {
        registration: row,
        configuration,
        fetch,
        apiBase: row.api_base.replace(/\/+$/, ''),
        profile,
        signingKey,
        responseShape,
      },
    };
  } catch (error) {
    await agent.close();
    throw error;
  }
}

/**
 * One process's open clients, by registration, and the schema checker every consent bank's answers go
 * through. `close()` when the process stops.
 */
export class ConsentClients {
  private readonly open = new Map<
    string,
    Promise<{ consentClient: ConsentClient; agent: Agent; updatedAt: number }>
  >();
  private readonly checkers = new Map<CountryProfile['market'], AnswerChecker>();

  constructor(
    private readonly secrets: SecretBox,
    private readonly options: ConsentClientOptions = {},
  ) {}

  /** The client for a registration row; a failed discovery is not kept, so the next call tries again. */
  async forRegistration(row: ConsentClientRow): Promise<ConsentClient> {
    const held = this.open.get(row.id);
    if (held) {
      const current = await held.catch(() => null);
      if (current && current.updatedAt === Number(row.updated_at)) return current.consentClient;
      if (this.open.get(row.id) === held) this.open.delete(row.id);
      if (current) void current.agent.close();
    }
    const opening = open(row, this.secrets, this.options).then((opened) => ({
      ...opened,
      updatedAt: Number(row.updated_at),
    }));
    this.open.set(row.id, opening);
    opening.catch(() => {
      if (this.open.get(row.id) === opening) this.open.delete(row.id);
    });
    return (await opening).consentClient;
  }

  /** The client for a bank in a mode, or null when the appliance is not registered there. */
  async forBank(db: Knex, bankId: string, mode: 'live' | 'test'): Promise<ConsentClient | null> {
    const row = await findRegistration(db, bankId, mode);
    return row ? this.forRegistration(row) : null;
  }

  /**
   * The schema checker of a profile's answers (Chile's reading of the files, or Brazil's as published):
   * compiled at the first sync that needs it (a few hundred ms), then kept for the process's life.
   */
  answers(profile: Pick<CountryProfile, 'market'>): AnswerChecker {
    let checker = this.checkers.get(profile.market);
    if (!checker) {
      checker = createAnswerChecker(profile.market);
      this.checkers.set(profile.market, checker);
    }
    return checker;
  }

  async close(): Promise<void> {
    const held = [...this.open.values()];
    this.open.clear();
    await Promise.all(
      held.map((opening) =>
        opening.then(
          (o) => o.agent.close(),
          () => undefined,
        ),
      ),
    );
  }
}
