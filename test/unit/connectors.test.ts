import t from 'tap';
import type { Connector } from '../../src/banks/connector.js';
import { connectorFor } from '../../src/banks/connectors.js';
import { BUILT_IN_BANK_IDS, CREDENTIAL_BANK_IDS } from '../../src/banks/institutions.js';
import { defaultConfig } from '../../src/config/defaults.js';

const sandbox: Connector = {
  login: async () => ({ kind: 'session', session: { holderName: 'x', state: {} } }),
  submitMfa: async () => ({ holderName: 'x', state: {} }),
  listAccounts: async () => [],
  listMovements: async () => [],
};

function configWith(connectors: Record<string, { url: string; secret: string; timeoutMs: number }>) {
  const config = defaultConfig('/tmp/unused');
  return { ...config, banks: { connectors } };
}

t.test('test mode uses the sandbox for every credential bank, configured or not', async (t) => {
  const config = configWith({ bci: { url: 'http://127.0.0.1:1', secret: 's'.repeat(16), timeoutMs: 500 } });
  for (const bankId of CREDENTIAL_BANK_IDS)
    t.equal(connectorFor(bankId, 'test', config, sandbox), sandbox, bankId);
});

t.test('the simulated consent banks have no credential connector in either mode', async (t) => {
  const config = configWith({});
  t.equal(BUILT_IN_BANK_IDS.length, CREDENTIAL_BANK_IDS.length + 2, "Chile's and Brazil's");
  for (const bank of ['bancoabierto', 'bancoabierto-br']) {
    t.equal(connectorFor(bank, 'test', config, sandbox), null);
    t.equal(connectorFor(bank, 'live', config, sandbox), null);
  }
});

t.test('live mode: the HTTP connector where configured, null elsewhere, one per bank', async (t) => {
  const gateway = { url: 'https://gateway.example:8443/bank', secret: 's'.repeat(16), timeoutMs: 500 };
  const config = configWith({ bci: gateway, itau: gateway });

  const bci = connectorFor('bci', 'live', config, sandbox);
  t.ok(bci, 'bci has a connector');
  t.not(bci, sandbox, 'which is not the sandbox');
  t.type(
    bci?.statements,
    'function',
    'the HTTP connector offers statements (the gateway may say unsupported)',
  );
  t.equal(connectorFor('bci', 'live', config, sandbox), bci, 'cached: the same connector the second time');
  const itau = connectorFor('itau', 'live', config, sandbox);
  t.ok(itau);
  t.not(itau, bci, 'another bank on the same gateway gets its own connector');

  t.equal(
    connectorFor('santander', 'live', config, sandbox),
    null,
    'a bank without a connector is unavailable',
  );
  t.equal(connectorFor('toString', 'live', config, sandbox), null, 'no prototype keys');

  const reloaded = configWith({ bci: { ...gateway } });
  t.not(connectorFor('bci', 'live', reloaded, sandbox), bci, 'a new configuration gets a new connector');
});
