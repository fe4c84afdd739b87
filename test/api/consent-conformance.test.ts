import t from 'tap';
import { clientCredentialsToken } from '../../src/banks/consent/client-credentials.js';
import { revokeDueGrants } from '../../src/links/consent/revocations.js';
import type { AuthorizationResponseFault } from '../../src/consent-bank/faults.js';
import { sha } from '../helpers/consent-bank.js';
import { conformanceFixture } from '../helpers/consent-conformance.js';
import { forEachEngine, setTimeLimit } from '../helpers/harness.js';
import { openWidget, widgetApi, widgetToken } from '../helpers/widget.js';

/*
 * The appliance as a FAPI 2.0 relying party (issue 41 item 4; docs/open-finance.md, "Client conformance"):
 * one test per module of the OpenID Foundation's FAPI 2.0 Security Profile (Final) relying-party test plan
 * (`FAPI2SPFinalClientTestPlan`, plain response mode, mTLS client authentication and sender constraint),
 * named after it, and a few of our own (`SvcClientTest…`) for what the plan leaves out. The simulated bank
 * misbehaves on purpose (a bank-wide fault) and the appliance must refuse as the module expects (the widget
 * says so, nothing is stored, the code is not exchanged) or recover (the link is made and syncs). The ID
 * token's modules are in consent-conformance-id-token.test.ts.
 */
setTimeLimit(t, 300_000);

forEachEngine(t, async (t, engine) => {
  const fx = await conformanceFixture(t, engine);
  const { app, bank, key } = fx;
  const faults = bank.faults;
  t.afterEach(async () => {
    faults.reset();
    // The next test discovers the bank again, as a process that starts after the bank changed would.
    await fx.rediscover();
  });
  const discovery = async () =>
    (await (await fetch(`${bank.issuer}/.well-known/openid-configuration`)).json()) as Record<
      string,
      unknown
    >;
  const tripRow = async (session: string) => {
    const row = await app.db
      .knex('widget_sessions')
      .where({ session_hash: sha(session) })
      .first();
    return app.db.knex('widget_consent_requests').where({ session_id: row.id }).orderBy('created_at').first();
  };

  t.test(
    'FAPI2SPFinalClientTestHappyPath: discovery, PAR with PKCE over mTLS, the bank, the code exchanged, the accounts read',
    async (t) => {
      const made = await fx.trip();
      const [pushed] = fx.pushed();
      t.ok(pushed, 'the authorization request was pushed (PAR)');
      t.equal(pushed!.get('response_type'), 'code');
      t.equal(pushed!.get('code_challenge_method'), 'S256', 'PKCE with S256');
      t.match(pushed!.get('code_challenge'), /^[\w-]{43}$/);
      t.match(pushed!.get('state'), /^[\w-]{32}$/, 'a state of its own');
      t.match(pushed!.get('scope'), /(^| )openid( |$)/, 'openid: an ID token comes with the tokens');
      t.notOk(pushed!.has('nonce'), 'no nonce (FAPI 2.0 leaves it optional with PKCE)');
      t.equal(made.callback.searchParams.get('iss'), bank.issuer, 'the bank names itself (RFC 9207)');
      const linkId = await fx.linked(t, made);
      const grant = await fx.grantOf(linkId);
      t.ok(grant.refreshToken, 'a refresh token is kept');
      t.ok(grant.accessTokenExpiresAt! > app.clock.now(), 'with the access token and its end');
    },
  );

  t.test(
    'FAPI2SPFinalClientTestDiscoveryIssuerMismatch: discovery names another issuer; no trip starts',
    async (t) => {
      faults.setFaults({ discoveryIssuerMismatch: true });
      t.equal((await discovery()).issuer, `${bank.issuer}INVALID`, 'the bank serves the wrong issuer');
      const before = await fx.counts();
      const opened = await openWidget(app, await widgetToken(app, key), undefined, 'en');
      const session = opened.bootstrap.session as string;
      const calls = bank.calls();
      const started = await widgetApi(app, session, 'POST', 'consent', { bank_id: 'bancoabierto' });
      t.equal(started.status, 502, started.text);
      t.match(started.body.error, { code: 'consent_invalid', type: 'api_error' }, 'OIDC Discovery 4.3');
      t.same(bank.calls(), calls, 'nothing reached the bank after discovery: no PAR');
      t.equal(await tripRow(session), undefined, 'no trip recorded');
      t.match((await widgetApi(app, session, 'GET', 'status')).body, { state: 'idle' });
      t.same(await fx.counts(), before, 'nothing stored');
    },
  );

  const responseModules: [
    string,
    AuthorizationResponseFault,
    string,
    'consent_invalid' | 'consent_unknown',
  ][] = [
    [
      'FAPI2SPFinalClientTestInvalidAuthorizationResponseIss',
      'invalid-iss',
      'the authorization response names another issuer',
      'consent_invalid',
    ],
    [
      'FAPI2SPFinalClientTestRemoveAuthorizationResponseIss',
      'no-iss',
      'the authorization response has no iss (RFC 9207; discovery says the bank sends it)',
      'consent_invalid',
    ],
    [
      'FAPI2SPFinalClientTestEnsureAuthorizationResponseWithInvalidStateFails',
      'invalid-state',
      'the authorization response carries another state',
      'consent_unknown',
    ],
    [
      'FAPI2SPFinalClientTestEnsureAuthorizationResponseWithInvalidMissingStateFails',
      'no-state',
      'the authorization response has no state (the appliance always sends one)',
      'consent_unknown',
    ],
  ];
  for (const [module, fault, what, problem] of responseModules)
    t.test(`${module}: ${what}; refused before the code is exchanged`, async (t) => {
      faults.setFaults({ authorizationResponse: fault });
      const made = await fx.trip();
      const sent = fx.pushed()[0]!;
      const said = made.callback.searchParams;
      t.ok(said.get('code'), 'the bank granted a code');
      if (fault === 'invalid-iss') t.equal(said.get('iss'), `${bank.issuer}1`, 'the bank sent the wrong iss');
      if (fault === 'no-iss') {
        t.notOk(said.has('iss'), 'the bank sent no iss');
        t.equal(
          (await discovery()).authorization_response_iss_parameter_supported,
          true,
          'though it says it does',
        );
      }
      if (fault === 'invalid-state')
        t.equal(said.get('state'), `${sent.get('state')}1`, 'the bank sent another state');
      if (fault === 'no-state') t.notOk(said.has('state'), 'the bank sent no state');
      await fx.refused(t, made, { problem, exchanged: false });
      const trip = await tripRow(made.session);
      if (problem === 'consent_invalid') t.equal(trip.outcome, 'consent_invalid', 'the trip is spent');
      else t.equal(trip.outcome, null, 'a state naming no trip settles none (it could be anyone’s)');
    });

  t.test(
    'FAPI2SPFinalClientTestTokenEndpointResponseWithoutExpiresIn: the token answer has no expires_in; the link is made and syncs',
    async (t) => {
      faults.setFaults({ tokenWithoutExpiresIn: true });
      const made = await fx.trip();
      t.notOk('expires_in' in fx.tokenAnswers()[0]!, 'the bank said nothing of the access token’s end');
      const linkId = await fx.linked(t, made);
      const grant = await fx.grantOf(linkId);
      t.equal(grant.accessTokenExpiresAt, null, 'the access token is kept with no end');
      t.ok(grant.refreshToken, 'and its refresh token');
      t.equal(await fx.syncAgain(linkId), null, 'a later sync uses it');
      // Refused once, the token is refreshed: the refresh's answer has no expires_in either.
      faults.setFaults({ tokenWithoutExpiresIn: true, unauthorizedUntilRefreshes: 1 });
      t.equal(await fx.syncAgain(linkId), null, 'a sync that must refresh first');
      const refreshed = await fx.grantOf(linkId);
      t.not(refreshed.accessToken, grant.accessToken, 'a new access token');
      t.equal(refreshed.accessTokenExpiresAt, null, 'kept with no end either');
    },
  );

  t.test(
    'FAPI2SPFinalClientTestTokenTypeCaseInsenstivity: token_type in another case (RFC 6749 5.1); the link is made and syncs',
    async (t) => {
      for (const tokenType of ['bEARER', 'bearer']) {
        faults.setFaults({ tokenType });
        await fx.rediscover();
        const made = await fx.trip();
        t.equal(fx.tokenAnswers()[0]!.token_type, tokenType, `the bank says "${tokenType}"`);
        const linkId = await fx.linked(t, made);
        // Past the access token's end by the appliance's clock: the sync refreshes first.
        app.clock.advance(11 * 60_000);
        t.equal(await fx.syncAgain(linkId), null, 'a later sync, refreshing first');
        t.equal(fx.tokenAnswers().at(-1)!.token_type, tokenType, 'the refresh was answered so too');
        const bankClient = await fx.bankClient();
        const { grantId } = await fx.grantOf(linkId);
        t.same(
          await bankClient.profile.queryGrant(bankClient, grantId),
          { kind: 'authorised' },
          'and a client_credentials token of that type works for Grant Management',
        );
      }
    },
  );

  t.test(
    'FAPI2SPFinalClientRefreshTokenTest: 401 until two refreshes, each rotating the refresh token; later syncs use the newest',
    async (t) => {
      faults.setFaults({ rotateRefreshTokens: true });
      const linkId = await fx.linked(t, await fx.trip());
      const bankClient = await fx.bankClient();
      const active = async (token: string) =>
        (await (await import('openid-client')).tokenIntrospection(bankClient.configuration, token)).active;
      const first = (await fx.grantOf(linkId)).refreshToken!;

      faults.setFaults({ rotateRefreshTokens: true, unauthorizedUntilRefreshes: 2 });
      const failed = await fx.syncAgain(linkId);
      t.match(
        failed,
        /^failed: rejected_credentials/,
        'the first sync refreshes once, is refused again, and stops (the bank still holds the grant)',
      );
      const second = (await fx.grantOf(linkId)).refreshToken!;
      t.not(second, first, 'the rotated refresh token was stored at once');
      t.equal(await fx.syncAgain(linkId), null, 'the next sync refreshes with it and reads the accounts');
      const third = (await fx.grantOf(linkId)).refreshToken!;
      t.not(third, second, 'rotated again, and stored');
      t.notOk(await active(first), 'the first refresh token no longer works at the bank');
      t.notOk(await active(second), 'nor the second');
      t.ok(await active(third), 'the newest does');

      faults.setFaults({ rotateRefreshTokens: true });
      // Past the access token's end by the appliance's clock: the next sync refreshes before its first call.
      app.clock.advance(11 * 60_000);
      t.equal(await fx.syncAgain(linkId), null, 'a later sync refreshes with the newest');
      t.not((await fx.grantOf(linkId)).refreshToken, third, 'and keeps the one it got');
      const link = (await app.request('GET', `/v1/links/${linkId}`, { key })).body;
      t.match(link, { status: 'active', last_error_code: null }, 'the link is well');
    },
  );

  t.test(
    'SvcClientTestGrantManagementHappyPath: query and revoke with a client_credentials token (Grant Management 6.1)',
    async (t) => {
      const linkId = await fx.linked(t, await fx.trip());
      const { grantId } = await fx.grantOf(linkId);
      const bankClient = await fx.bankClient();
      const calls = bank.calls().grant_management;
      // The endpoint refuses any token but a client_credentials one with the scope (401, 403): an answer
      // other than `unknown` says the appliance sent one.
      t.same(await bankClient.profile.queryGrant(bankClient, grantId), { kind: 'authorised' }, 'query');
      t.equal(bank.calls().grant_management - calls, 1, 'one call');
      t.ok(
        fx
          .tokenAnswers()
          .some((answer) => String(answer.scope).split(' ').includes('grant_management_query')),
        'with a token of grant_management_query',
      );
      const deleted = await app.request('DELETE', `/v1/links/${linkId}`, { key });
      t.ok(deleted.status < 300, `the link is deleted (${deleted.status})`);
      t.equal(await revokeDueGrants(app.services), 1, 'the outbox revokes its grant');
      t.match(
        await app.db.knex('grant_revocations').where({ link_id: linkId }).first(),
        { status: 'revoked', attempts: 1 },
        'the bank confirmed it (204)',
      );
      t.same(
        await bankClient.profile.queryGrant(bankClient, grantId),
        { kind: 'ended', status: 'revoked' },
        'the bank says so',
      );
    },
  );

  t.test('SvcClientTestGrantManagementUnknownGrant: 404 for a grant the bank does not know', async (t) => {
    const bankClient = await fx.bankClient();
    const unknown = 'grant-the-bank-never-issued';
    const endpoint = String(bankClient.configuration.serverMetadata().grant_management_endpoint);
    const raw = await bankClient.fetch(`${endpoint}/${unknown}`, {
      method: 'GET',
      headers: {
        authorization: `Bearer ${await clientCredentialsToken(bankClient, 'grant_management_query')}`,
      },
    });
    t.equal(raw.status, 404, 'the bank answers 404');
    t.match(await raw.json(), { error: 'invalid_grant' });
    t.same(
      await bankClient.profile.queryGrant(bankClient, unknown),
      { kind: 'ended', status: 'not found' },
      'a query reads it as ended',
    );
    t.same(
      await bankClient.profile.revokeGrant(bankClient, unknown, app.clock.now()),
      { kind: 'gone' },
      'a revoke as done',
    );
  });

  t.test(
    'SvcClientTestNoMtlsEndpointAliases: discovery without mtls_endpoint_aliases; the plain endpoints, over mTLS',
    async (t) => {
      faults.setFaults({ noMtlsEndpointAliases: true });
      const served = await discovery();
      t.notOk('mtls_endpoint_aliases' in served, 'the bank names no aliases (RFC 8705 section 5)');
      for (const name of [
        'token_endpoint',
        'pushed_authorization_request_endpoint',
        'grant_management_endpoint',
      ])
        t.ok(String(served[name]).startsWith(bank.mtlsBase), `${name} is on the mTLS face`);
      const made = await fx.trip();
      const bankClient = await fx.bankClient();
      t.notOk(bankClient.configuration.serverMetadata().mtls_endpoint_aliases, 'the appliance saw none');
      t.equal(fx.pushed().length, 1, 'it pushed to the top-level PAR endpoint (only the mTLS face has one)');
      const linkId = await fx.linked(t, made);
      const { grantId } = await fx.grantOf(linkId);
      t.same(
        await bankClient.profile.queryGrant(bankClient, grantId),
        { kind: 'authorised' },
        'Grant Management at its top-level endpoint',
      );
      app.clock.advance(11 * 60_000);
      t.equal(await fx.syncAgain(linkId), null, 'a refresh at the top-level token endpoint, and a sync');
    },
  );
});
