import type { BankConnectorSettings } from './connector-settings.js';
import type { Connector } from './connector.js';
import { createHttpConnector } from './http/http-connector.js';
import { findInstitution } from './institutions.js';

/**
 * One HTTP connector (and so one undici connection pool) per bank and configuration entry. Keyed on the
 * entry object itself, weakly: a test or a reload that builds a new configuration gets new connectors, and
 * a dropped configuration takes its connectors with it, so this holds no state a test would have to reset.
 */
const httpConnectors = new WeakMap<BankConnectorSettings, Map<string, Connector>>();

/**
 * The credential connector that serves `bankId` in `mode`: the sandbox for every bank in test mode (but the
 * consent sandbox, which has none); in live mode the
 * HTTP connector to the gateway configured in `banks.connectors[bankId]`, or null when there is none (the
 * bank is then unavailable in live mode).
 */
export function connectorFor(
  bankId: string,
  mode: 'test' | 'live',
  config: { readonly banks: { readonly connectors: Readonly<Record<string, BankConnectorSettings>> } },
  sandbox: Connector,
): Connector | null {
  // The consent sandbox is never reached with a password: the credential sandbox does not stand in for it.
  if (findInstitution(bankId)?.consentSandbox) return null;
  if (mode === 'test') return sandbox;
  const entry = Object.hasOwn(config.banks.connectors, bankId) ? config.banks.connectors[bankId] : undefined;
  if (!entry) return null;
  let byBank = httpConnectors.get(entry);
  if (!byBank) {
    byBank = new Map();
    httpConnectors.set(entry, byBank);
  }
  let connector = byBank.get(bankId);
  if (!connector) {
    connector = createHttpConnector(entry, bankId);
    byBank.set(bankId, connector);
  }
  return connector;
}
