import type { Test } from 'tap';
import t from 'tap';
import type { BankOptions } from '../../src/consent-bank/bank-profile.js';
import { findRegistration } from '../../src/banks/consent/registrations.js';
import { atTheBank } from '../helpers/consent-bank.js';
import { BRASIL } from '../helpers/consent-countries.js';
import { CONSENT_CALLBACK_PATH } from '../helpers/consent-flow.js';
import { formPostFields } from '../helpers/brasil-bank.js';
import {
  createTenant,
  forEachEngine,
  runSyncs,
  setTimeLimit,
  startTestApp,
  type EngineName,
  type TestApp,
} from '../helpers/harness.js';
import { openWidget, widgetApi, widgetToken } from '../helpers/widget.js';

/*
 * The appliance at an Open Finance Brasil bank read against FAPI 1.0 Advanced (issue 41 item 6), on both
 * engines over real HTTP and mTLS, against the simulated Brazilian bank started three ways: as it is (both
 * response kinds, both client authentications), with `code id_token` only (no JARM: Brazil's later profile),
 * and with `private_key_jwt` only. The bank refuses a PAR without a signed request object, so every connect
 * here also shows the appliance sends one (§5.2.2 clause 10).
 */
setTimeLimit(t, 300_000);

const BANK_ID = BRASIL.bankId;
const CPF = BRASIL.users.holder;

type BrasilChoice = Pick<BankOptions, 'authorizationResponses' | 'clientAuthMethods'>;

async function appWith(t: Test, engine: EngineName, brasil: BrasilChoice = {}) {
  const app = await startTestApp(t, engine, { consentBank: { brasil } });
  const tenant = await createTenant(app);
  return { app, sk: tenant.keys.sk_test.secret };
}

async function registrationOf(app: TestApp) {
  const row = (await findRegistration(app.db.knex, BANK_ID, 'test'))!;
  return { row, registered: JSON.parse(row.registration) as Record<string, unknown> };
}

/**
 * The customer's trip: the widget's start, sign-in and consent at the bank; then the answer carried back
 * as the browser would: a redirect (JARM) followed, or the bank's form_post page submitted (`code id_token`).
 */
async function connect(
  app: TestApp,
  sk: string,
  options: { tamper?: (fields: URLSearchParams) => void } = {},
) {
  const opened = await openWidget(
    app,
    await widgetToken(app, sk, { institution_id: BANK_ID }),
    undefined,
    'en',
  );
  const session = opened.bootstrap.session as string;
  const started = await widgetApi(app, session, 'POST', 'consent', { cpf: CPF });
  if (started.status !== 200) return { session, started, returned: null };
  const callbackUrl = `${app.url}${CONSENT_CALLBACK_PATH}`;
  const done = await atTheBank(started.body.authorization_url, callbackUrl, { cpf: CPF, language: 'pt' });
  let returned: Response;
  let posted: URLSearchParams | null = null;
  if (done.callback.startsWith(callbackUrl)) returned = await fetch(done.callback);
  else {
    posted = formPostFields(await done.answer.text());
    options.tamper?.(posted);
    returned = await fetch(callbackUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: posted.toString(),
    });
  }
  return { session, started, returned, posted, callback: done.callback };
}

forEachEngine(t, async (t, engine) => {
  t.test(
    'FAPI 1.0 Advanced §5.2.2 clause 10: the registration carries a PS256 signing key, and PAR a request object',
    async (t) => {
      const { app, sk } = await appWith(t, engine);
      const { row, registered } = await registrationOf(app);
      t.ok(row.signing_key_sealed, 'a signing key is kept');
      t.notMatch(row.signing_key_sealed!, /PRIVATE KEY/, 'sealed, never in the clear');
      t.equal(registered.request_object_signing_alg, 'PS256');
      const keys = (registered.jwks as { keys: Record<string, string>[] }).keys;
      t.equal(keys.length, 1, 'one public key registered as jwks (RFC 7591 §2)');
      t.match(keys[0], { kty: 'RSA', alg: 'PS256', use: 'sig' });
      t.notOk('d' in keys[0]!, 'the public half only');
      t.equal(
        registered.token_endpoint_auth_method,
        'tls_client_auth',
        'tls_client_auth where both are offered',
      );
      t.same(registered.response_types, ['code'], 'code with JARM where the bank offers it');

      const trip = await connect(app, sk);
      t.equal(trip.started.status, 200, trip.started.text);
      t.ok(new URL(trip.callback!).searchParams.get('response'), 'the answer came as JARM');
      t.equal(trip.returned!.status, 200);
      t.equal(await runSyncs(app), 1);
      t.match((await widgetApi(app, trip.session, 'GET', 'status')).body, { state: 'succeeded' });
    },
  );

  t.test(
    'FAPI 1.0 Advanced §5.2.2.1: a bank of code id_token only (no JARM) is connected by form_post, c_hash and s_hash checked',
    async (t) => {
      const { app, sk } = await appWith(t, engine, { authorizationResponses: 'code id_token' });
      const { registered } = await registrationOf(app);
      t.same(registered.response_types, ['code id_token'], 'registered for the hybrid flow');

      const trip = await connect(app, sk);
      t.equal(trip.started.status, 200, trip.started.text);
      t.ok(trip.posted?.get('id_token'), 'the bank posts the ID token with the code');
      t.equal(trip.returned!.status, 200);
      t.equal(await runSyncs(app), 1, 'the first sync runs');
      t.match((await widgetApi(app, trip.session, 'GET', 'status')).body, { state: 'succeeded' });

      // An ID token of another trip: its s_hash and c_hash cover another state and code (§5.2.2.1).
      const first = await connect(app, sk);
      const idToken = first.posted!.get('id_token')!;
      const second = await connect(app, sk, { tamper: (fields) => fields.set('id_token', idToken) });
      t.equal(second.returned!.status, 200);
      t.match(
        (await widgetApi(app, second.session, 'GET', 'status')).body,
        { state: 'failed', error: { code: 'consent_invalid' } },
        "a detached signature that is not the answer's own is refused",
      );
    },
  );

  t.test(
    'RFC 7523 §2.2: a bank of private_key_jwt only is registered and used with client assertions',
    async (t) => {
      const { app, sk } = await appWith(t, engine, { clientAuthMethods: ['private_key_jwt'] });
      const { registered } = await registrationOf(app);
      t.equal(registered.token_endpoint_auth_method, 'private_key_jwt');
      t.equal(registered.token_endpoint_auth_signing_alg, 'PS256');
      t.notOk(registered.tls_client_auth_subject_dn, 'no subject DN to match');

      const trip = await connect(app, sk);
      t.equal(
        trip.started.status,
        200,
        `the consent is created with a client_credentials token: ${trip.started.text}`,
      );
      t.equal(trip.returned!.status, 200);
      t.equal(await runSyncs(app), 1);
      t.match((await widgetApi(app, trip.session, 'GET', 'status')).body, { state: 'succeeded' });
    },
  );
});
