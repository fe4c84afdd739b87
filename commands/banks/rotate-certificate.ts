import { Args, Flags } from '@oclif/core';
import { BaseCommand } from '../../src/cli/base-command.js';
import type { RotationReport } from '../../src/banks/consent/registration-management.js';

export default class BanksRotateCertificate extends BaseCommand {
  static override summary =
    'Give a consent bank registration a new client certificate, keeping its client id and every consent (RFC 7592 client update over mutual TLS)';
  static override examples = [
    '<%= config.bin %> banks rotate-certificate bci --cert client-2027.pem --key client-2027.key',
    '<%= config.bin %> banks rotate-certificate bancoabierto --mode test --cert client-2.pem --key client-2.key --json',
  ];
  static override args = {
    bank: Args.string({
      required: true,
      description: 'the bank code of the registration (svc banks registrations)',
    }),
  };
  static override flags = {
    cert: Flags.file({
      required: true,
      exists: true,
      description: 'the new client certificate (PEM; the chain after it)',
    }),
    key: Flags.file({
      required: true,
      exists: true,
      description: "the new certificate's private key (PEM); stored sealed",
    }),
    'software-statement': Flags.file({
      exists: true,
      description:
        'a new software statement to send with the update, when the bank or directory asks for one',
    }),
    mode: Flags.string({
      options: ['live', 'test'],
      default: 'live',
      description: 'which mode the registration serves',
    }),
  };

  async run(): Promise<RotationReport> {
    const { args, flags } = await this.parse(BanksRotateCertificate);
    const config = this.appConfig(flags.home);
    const { readFileSync } = await import('node:fs');
    const { loadSecretBox } = await import('../../src/secrets/master-key-file.js');
    const { rotateCertificate } = await import('../../src/banks/consent/registration-management.js');
    const { formatTable } = await import('../../src/cli/views/table.js');
    const { CliError } = await import('../../src/errors/cli-error.js');
    const { BudgetGate, withBankCalls } = await import('../../src/banks/budget/bank-calls.js');
    const clock = this.clock(config);
    const bank = { bankId: args.bank, mode: flags.mode as 'live' | 'test' };
    // Each call to the bank (discovery, the registration's update, the check) takes a permit of its budget.
    const report = await this.withDatabase(config, (db) =>
      withBankCalls(BudgetGate.of({ db, clock, config }, bank, null, 'on_demand', 10_000), () =>
        rotateCertificate(
          { db, secrets: loadSecretBox(config), now: () => clock.now() },
          {
            bankId: args.bank,
            mode: flags.mode as 'live' | 'test',
            certificatePem: readFileSync(flags.cert, 'utf8'),
            privateKeyPem: readFileSync(flags.key, 'utf8'),
            softwareStatement: flags['software-statement']
              ? readFileSync(flags['software-statement'], 'utf8')
              : null,
          },
        ),
      ),
    );
    const where = `${report.bank_id} (${report.mode} mode)`;
    const until = new Date(report.certificate_expires_at).toISOString().slice(0, 10);
    if (!this.jsonEnabled()) {
      for (const line of formatTable(
        ['STEP', 'OUTCOME', 'DETAIL'],
        report.steps.map((s) => [s.step, s.outcome, s.detail]),
      ))
        this.log(line);
    }
    switch (report.outcome) {
      case 'rotated':
        if (!this.jsonEnabled())
          this.log(
            `Rotated: ${where} client ${report.client_id} now uses ${report.subject_dn}, valid until ${until}; every consent stays.`,
          );
        return report;
      case 'refused':
        throw new CliError(
          'rotation_refused',
          `The bank refused the change for ${where}: nothing changed, the registration keeps its certificate.`,
          1,
          { report },
        );
      case 'rolled_back':
        throw new CliError(
          'rotation_rolled_back',
          `The new certificate does not work at ${where}: the change was undone, the registration keeps its current certificate (valid until ${until}).`,
          1,
          { report },
        );
      case 'rollback_failed':
        throw new CliError(
          'rotation_rollback_failed',
          `The new certificate does not work at ${where} and the change could not be undone: see the rollback step.`,
          1,
          { report },
        );
    }
  }
}
