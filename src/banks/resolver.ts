import type { Connector } from './connector.js';

/** The connector for a bank in a mode, or null when the bank is unavailable in that mode. */
export type ConnectorResolver = (bankId: string, mode: 'live' | 'test') => Connector | null;
