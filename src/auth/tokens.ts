import { randomBytes } from 'node:crypto';
import { randomBase62 } from '../keys/key-format.js';

/** `wt_{8hex}_sec_{secret}`: the public part names the token row, the secret proves possession. */
export function generateWidgetToken(): { id: string; token: string } {
  const id = `wt_${randomBytes(4).toString('hex')}`;
  return { id, token: `${id}_sec_${randomBase62(32)}` };
}

/** `ri_{16hex}_sec_{secret}`: issued by a refresh intent that waits for MFA, used like a widget token. */
export function generateIntentToken(intentId: string): string {
  return `${intentId}_sec_${randomBase62(32)}`;
}

/** `et_{secret}`: the exchange token the widget hands to the opener. */
export function generateExchangeToken(): string {
  return `et_${randomBase62(40)}`;
}

export const WIDGET_TOKEN = /^wt_[0-9a-f]{8}_sec_[0-9A-Za-z]{32}$/;
export const INTENT_TOKEN = /^ri_[0-9a-f]{16}_sec_[0-9A-Za-z]{32}$/;
export const EXCHANGE_TOKEN = /^et_[0-9A-Za-z]{40}$/;
