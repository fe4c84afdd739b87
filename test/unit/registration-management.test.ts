import t from 'tap';
import {
  NOT_SENT_IN_UPDATE,
  readProblem,
  sameSubjectDn,
  updateBody,
  updateProblem,
} from '../../src/banks/consent/registration-management.js';

/*
 * The pure parts of `svc banks rotate-certificate` (src/banks/consent/registration-management.ts): the
 * RFC 7592 §2.2 update body made from a §2.1 read, and the checks on what the bank answers.
 */

/** A client as an RFC 7592 §2.1 read answers it (oidc-provider's shape, with a bank's extension). */
const read = {
  client_id: 'client-1',
  client_id_issued_at: 1_764_000_000,
  client_secret_expires_at: 0,
  registration_access_token: 'rat-1',
  registration_client_uri: 'https://bank.example/reg/client-1',
  client_name: 'svc appliance',
  redirect_uris: ['https://appliance.example/widget/consent/callback'],
  grant_types: ['authorization_code', 'refresh_token'],
  response_types: ['code'],
  token_endpoint_auth_method: 'tls_client_auth',
  tls_client_auth_subject_dn: 'C=CL,O=svc sandbox,CN=svc appliance',
  tls_client_certificate_bound_access_tokens: true,
  software_statement: 'aaa.bbb.ccc',
  jwks_uri: null,
  x_bank: { nested: [1, 2] },
};

t.test(
  'RFC 7592 §2.2: the update carries every field as read, client_id, and the new subject DN',
  async (t) => {
    const body = updateBody(read, {
      clientId: 'client-1',
      subjectDn: 'C=CL,O=svc sandbox,CN=svc appliance 2',
    });
    t.same(body, {
      client_id: 'client-1',
      client_name: 'svc appliance',
      redirect_uris: ['https://appliance.example/widget/consent/callback'],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'tls_client_auth',
      tls_client_auth_subject_dn: 'C=CL,O=svc sandbox,CN=svc appliance 2',
      tls_client_certificate_bound_access_tokens: true,
      software_statement: 'aaa.bbb.ccc',
      jwks_uri: null,
      x_bank: { nested: [1, 2] },
    });
    t.equal(
      read.tls_client_auth_subject_dn,
      'C=CL,O=svc sandbox,CN=svc appliance',
      'the read is not changed',
    );
  },
);

t.test(
  'RFC 7592 §2.2: MUST NOT include registration_access_token, registration_client_uri, client_secret_expires_at, client_id_issued_at',
  async (t) => {
    t.same([...NOT_SENT_IN_UPDATE].sort(), [
      'client_id_issued_at',
      'client_secret_expires_at',
      'registration_access_token',
      'registration_client_uri',
    ]);
    const body = updateBody(
      { ...read, client_secret: 'a secret' },
      { clientId: 'client-1', subjectDn: 'CN=x' },
    );
    for (const field of [...NOT_SENT_IN_UPDATE, 'client_secret']) t.notOk(field in body, `no ${field}`);
  },
);

t.test('RFC 7592 §2.2: client_id MUST be included, and is the one issued', async (t) => {
  const { client_id: _omitted, ...withoutId } = read;
  t.equal(updateBody(withoutId, { clientId: 'client-1', subjectDn: 'CN=x' }).client_id, 'client-1');
  t.match(readProblem({ ...read, client_id: 'client-2' }, 'client-1'), /another client id/);
  t.equal(readProblem(read, 'client-1'), null);
  t.match(
    readProblem({ ...read, token_endpoint_auth_method: 'private_key_jwt' }, 'client-1'),
    /private_key_jwt, not tls_client_auth/,
  );
});

t.test('a new software statement replaces the one the bank holds; none given keeps it', async (t) => {
  const change = { clientId: 'client-1', subjectDn: 'CN=x' };
  t.equal(
    updateBody(read, { ...change, softwareStatement: ' new.state.ment\n' }).software_statement,
    'new.state.ment',
  );
  t.equal(updateBody(read, { ...change, softwareStatement: null }).software_statement, 'aaa.bbb.ccc');
});

t.test('RFC 7592 §2.2 answer: the same client, now with the subject DN asked for', async (t) => {
  const answer = { ...read, tls_client_auth_subject_dn: 'C=CL, O=svc sandbox, cn=svc appliance 2' };
  t.equal(
    updateProblem(answer, 'client-1', 'C=CL,O=svc sandbox,CN=svc appliance 2'),
    null,
    'spelled otherwise',
  );
  t.match(
    updateProblem(read, 'client-1', 'C=CL,O=svc sandbox,CN=svc appliance 2'),
    /names subject DN C=CL,O=svc sandbox,CN=svc appliance, not/,
  );
  t.match(updateProblem({ ...answer, client_id: 'other' }, 'client-1', 'CN=x'), /another client id/);
  t.match(
    updateProblem({ ...answer, tls_client_auth_subject_dn: undefined }, 'client-1', 'CN=x'),
    /names subject DN undefined/,
  );
});

t.test('subject DNs compare by RFC 4514 attribute and value, escaped commas kept', async (t) => {
  t.ok(sameSubjectDn('C=CL,O=Banco\\, S.A.,CN=x', 'c=CL, o=Banco\\, S.A., CN=x'));
  t.notOk(sameSubjectDn('C=CL,O=Banco\\, S.A.,CN=x', 'C=CL,O=Banco,CN=x'));
  t.notOk(sameSubjectDn('CN=svc appliance', 'CN=svc appliance 2'));
  t.notOk(sameSubjectDn(42, 'CN=x'));
});
