import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import type { ConsentClientView } from '../../src/banks/consent/registrations.js';

export default class BanksRegister extends BaseCommand {
  static override summary =
    'Register this appliance with a consent bank (discovery, then Dynamic Client Registration over mutual TLS)';
  static override examples = [
    '<%= config.bin %> banks register bci --issuer https://auth.bci.example --api-base https://api.bci.example/open-finance --software-statement ssa.jwt --cert client.pem --key client.key',
    '<%= config.bin %> banks register bancoabierto --mode test --issuer https://127.0.0.1:8443 --api-base https://127.0.0.1:8443/api --software-statement ssa.jwt --cert client.pem --key client.key --ca bank-ca.pem --json',
  ];
  static override args = {
    bank: Args.string({ required: true, description: 'the bank code (GET /v1/institutions)' }),
  };
  static override flags = {
    issuer: Flags.string({ required: true, description: "the bank's authorization server (its issuer URL)" }),
    'api-base': Flags.string({ required: true, description: "the base URL of the bank's data APIs" }),
    'software-statement': Flags.file({
      required: true,
      exists: true,
      description: 'the software statement (a signed JWT) from the directory',
    }),
    cert: Flags.file({
      required: true,
      exists: true,
      description: "the client's certificate (PEM; the chain after it)",
    }),
    key: Flags.file({
      required: true,
      exists: true,
      description: "the certificate's private key (PEM); stored sealed",
    }),
    ca: Flags.file({
      exists: true,
      description: "the CA of the bank's server certificate, when not a public one",
    }),
    'redirect-uri': Flags.string({
      description:
        'the callback the bank sends the browser back to; default: <api.baseUrl>/widget/consent/callback',
    }),
    mode: Flags.string({
      options: ['live', 'test'],
      default: 'live',
      description: 'which mode this registration serves',
    }),
  };

  async run(): Promise<ConsentClientView> {
    const { args, flags } = await this.parse(BanksRegister);
    const config = this.appConfig(flags.home);
    const { readFileSync } = await import('node:fs');
    const { loadSecretBox } = await import('../../src/secrets/master-key-file.js');
    const { registerWithBank, CONSENT_CALLBACK_PATH } = await import('../../src/banks/consent/register.js');
    const { saveRegistration, viewOf } = await import('../../src/banks/consent/registrations.js');
    const { institutionsOf } = await import('../../src/banks/institutions.js');
    const base = config.api.baseUrl || `http://${config.api.host}:${config.api.port}`;
    const { BudgetGate, withBankCalls } = await import('../../src/banks/budget/bank-calls.js');
    const clock = this.clock(config);
    const now = clock.now();
    const mode = flags.mode as 'live' | 'test';
    // The discovery and registration calls count against the bank's budget (docs/open-finance.md, "Bank limits").
    const row = await this.withDatabase(config, (db) =>
      withBankCalls(
        BudgetGate.of({ db, clock, config }, { bankId: args.bank, mode }, null, 'on_demand', 10_000),
        () =>
          registerWithBank(
            {
              bankId: args.bank,
              mode: flags.mode as 'live' | 'test',
              issuer: flags.issuer,
              apiBase: flags['api-base'],
              softwareStatement: readFileSync(flags['software-statement'], 'utf8'),
              certificatePem: readFileSync(flags.cert, 'utf8'),
              privateKeyPem: readFileSync(flags.key, 'utf8'),
              serverCaPem: flags.ca ? readFileSync(flags.ca, 'utf8') : null,
              redirectUri: flags['redirect-uri'] ?? `${base}${CONSENT_CALLBACK_PATH}`,
            },
            loadSecretBox(config),
            now,
            { institutions: institutionsOf(config) },
          ),
      ),
    );
    await this.withDatabase(config, (db) => db.transaction((trx) => saveRegistration(trx, row)));
    const view = viewOf(row);
    if (!this.jsonEnabled())
      this.log(
        `Registered with ${view.bank_id} (${view.mode} mode) as client ${view.client_id} at ${view.issuer}.`,
      );
    return view;
  }
}
