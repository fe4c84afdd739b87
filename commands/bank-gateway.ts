import { Flags } from '@oclif/core';
import { BaseCommand } from '../src/cli/base-command.js';
import { CONNECTOR_ERROR_CODES, type ConnectorErrorCode } from '../src/banks/connector.js';

const MIN_SECRET_LENGTH = 16;

export default class BankGateway extends BaseCommand {
  static override summary = 'Run the reference bank gateway (HTTP connector protocol) over the sandbox banks';
  static override description =
    'Serves docs/connector-protocol.md on a plain HTTP port, backed by the sandbox connector, so live mode can ' +
    'be tried and drilled without a real bank: point banks.connectors.<bank>.url at the printed URL with the ' +
    'same secret. Faults can also be changed while it runs with a signed POST /_admin/faults. Stops on ' +
    'SIGTERM or SIGINT.';
  static override enableJsonFlag = false;
  static override examples = [
    'SVC_GATEWAY_SECRET=... <%= config.bin %> bank-gateway --port 8090',
    '<%= config.bin %> bank-gateway --port 8090 --latency-ms 800',
    '<%= config.bin %> bank-gateway --port 8090 --fault bank_unavailable --fault-rate 0.5',
  ];
  static override flags = {
    port: Flags.integer({
      description: 'port to listen on (0: any free port)',
      default: 8090,
      min: 0,
      max: 65535,
    }),
    host: Flags.string({ description: 'address to listen on', default: '127.0.0.1' }),
    secret: Flags.string({
      description: `shared secret that signs every request (at least ${MIN_SECRET_LENGTH} characters)`,
      env: 'SVC_GATEWAY_SECRET',
    }),
    'latency-ms': Flags.integer({ description: 'delay before every answer', min: 0 }),
    fault: Flags.string({
      description: 'answer requests with this connector error',
      options: [...CONNECTOR_ERROR_CODES],
    }),
    'fault-rate': Flags.custom<number>({
      description: 'share of requests that get the fault, from 0 to 1',
      default: 1,
      parse: async (input) => {
        const rate = Number(input);
        if (input.trim() === '' || !(rate >= 0 && rate <= 1))
          throw new Error('--fault-rate must be from 0 to 1');
        return rate;
      },
    })(),
  };

  async run(): Promise<void> {
    const { flags } = await this.parse(BankGateway);
    const secret = flags.secret ?? '';
    if (secret.length < MIN_SECRET_LENGTH) {
      // Never echo the value: only say what is missing.
      this.error(
        `Give the shared secret with --secret or SVC_GATEWAY_SECRET (at least ${MIN_SECRET_LENGTH} characters).`,
        { exit: 2 },
      );
    }
    const { startBankGateway } = await import('../src/banks/gateway/gateway.js');
    const { createSandboxConnector } = await import('../src/banks/sandbox/sandbox-connector.js');
    const gateway = await startBankGateway({
      host: flags.host,
      port: flags.port,
      secret,
      connector: createSandboxConnector(),
      latencyMs: flags['latency-ms'],
      onError: (error) =>
        this.logToStderr(`bank-gateway: unexpected error: ${(error as Error).stack ?? error}`),
    });
    if (flags.fault)
      gateway.setFaults({ error: flags.fault as ConnectorErrorCode, rate: flags['fault-rate'] });

    this.log(`Bank gateway listening on ${gateway.url} (sandbox banks)`);
    const signal = await new Promise<NodeJS.Signals>((resolve) => {
      const stop = (received: NodeJS.Signals) => {
        process.off('SIGTERM', stop);
        process.off('SIGINT', stop);
        resolve(received);
      };
      process.on('SIGTERM', stop);
      process.on('SIGINT', stop);
    });
    await gateway.close();
    this.log(`Bank gateway stopped (${signal}).`);
  }
}
