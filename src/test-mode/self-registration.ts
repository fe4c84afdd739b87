import type { Database } from '../db/database.js';
import { gapsOfRegistration, registerWithBank } from '../banks/consent/register.js';
import { findRegistration, saveRegistration, type ConsentClientRow } from '../banks/consent/registrations.js';
import { CONSENT_SANDBOX_BANK_ID } from '../banks/institutions.js';
import type { SecretBox } from '../secrets/secret-box.js';
import type { ConsentBank } from '../consent-bank/consent-bank.js';
import { issueSoftwareStatement } from '../consent-bank/software-statement.js';
import { subjectDnOf, type TestCaMaterial } from '../consent-bank/test-ca.js';

/*
 * Test mode needs no setup: the appliance registers itself with the simulated bank it serves, as an operator
 * registers with a real one (`svc banks register`), with a software statement from the simulated directory
 * and the client certificate of the local test CA. It registers again only when something the registration
 * depends on changed (the bank's addresses, the certificate, the redirect URI, the widget's name, what the appliance asks to be
 * registered with), so restarts keep the client.
 */

export interface SelfRegistration {
  db: Database;
  secrets: SecretBox;
  bank: Pick<ConsentBank, 'issuer' | 'mtlsBase'>;
  ca: TestCaMaterial;
  redirectUri: string;
  now: number;
  /**
   * The requester's name the bank shows on its consent page (`client_name` of the software statement, RFC 7591
   * §2.3): the operator's `widget.name`, the name the widget's consent screen says the data goes to.
   */
  clientName: string;
  /** Which simulated bank: the Chilean one unless said (the Brazilian one is `bancoabierto-br`). */
  bankId?: string;
}

/**
 * Whether the held client still serves: same addresses, certificate and redirect URI, and registered with
 * everything this build asks (registrationGaps): an upgrade that asks for more (0.9.x added bound tokens,
 * `authorization_details_types` and `client_credentials`, which the strict simulated bank enforces) registers
 * again rather than keep a client every consent would fail with.
 */
function isCurrent(row: ConsentClientRow, input: SelfRegistration): boolean {
  const registration = JSON.parse(row.registration) as { redirect_uris?: unknown; client_name?: unknown };
  return (
    gapsOfRegistration(row).length === 0 &&
    row.issuer === input.bank.issuer &&
    row.api_base === input.bank.mtlsBase &&
    row.certificate_pem === input.ca.client.cert &&
    row.server_ca_pem === input.ca.caCert &&
    Array.isArray(registration.redirect_uris) &&
    registration.redirect_uris.includes(input.redirectUri) &&
    registration.client_name === input.clientName
  );
}

/** The appliance's test-mode client at the simulated bank, registered now if it was not already. */
export async function registerWithSimulatedBank(input: SelfRegistration): Promise<ConsentClientRow> {
  const bankId = input.bankId ?? CONSENT_SANDBOX_BANK_ID;
  const held = await findRegistration(input.db.knex, bankId, 'test');
  if (held && isCurrent(held, input)) return held;
  const subjectDn = subjectDnOf(input.ca.client.cert);
  const row = await registerWithBank(
    {
      bankId,
      mode: 'test',
      issuer: input.bank.issuer,
      apiBase: input.bank.mtlsBase,
      softwareStatement: await issueSoftwareStatement(input.ca.directoryKey, {
        clientName: input.clientName,
        redirectUris: [input.redirectUri],
        subjectDn,
        now: Math.floor(input.now / 1000),
      }),
      redirectUri: input.redirectUri,
      certificatePem: input.ca.client.cert,
      privateKeyPem: input.ca.client.key,
      serverCaPem: input.ca.caCert,
    },
    input.secrets,
    input.now,
    { allowLoopbackHttp: true },
  );
  await input.db.transaction((trx) => saveRegistration(trx, row));
  return row;
}
