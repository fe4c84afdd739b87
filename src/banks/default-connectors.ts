import type { BankConnectorSettings } from './connector-settings.js';
import { connectorFor } from './connectors.js';
import type { ConnectorResolver } from './resolver.js';
import { createSandboxConnector } from './sandbox/sandbox-connector.js';

/** Test mode: the sandbox for every bank. Live mode: the gateway configured for the bank, if any. */
export function defaultConnectors(config: {
  readonly banks: { readonly connectors: Readonly<Record<string, BankConnectorSettings>> };
}): ConnectorResolver {
  const sandbox = createSandboxConnector();
  return (bankId, mode) => connectorFor(bankId, mode, config, sandbox);
}
