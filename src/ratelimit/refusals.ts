import ipaddr from 'ipaddr.js';
import type { RateLimit } from '../config/defaults.js';
import { MemoryRateLimiter } from './limiter.js';
import type { Decision } from './token-bucket.js';

/**
 * Requests refused for their credential (401: none, malformed, unknown; 403: a kind this route does not
 * accept) are charged to a bucket of their own, never to a key's groups: a publishable key's mistakes must
 * not spend its secret key's budget, and guessing keys must stay slow. A 401 is charged to the client's
 * address (an IPv6 client to its /64, which one host usually holds whole); a 403 to the credential that
 * was refused.
 *
 * The buckets live in this process's memory even when the keys' buckets live in the database: an
 * unauthenticated client must not be able to make the database write a row per address it tries. So on
 * several API processes each allows the limit (N processes, N times the rate), which still bounds guessing.
 */
export class RefusalLimiter {
  private readonly buckets = new MemoryRateLimiter();

  constructor(readonly limit: RateLimit) {}

  takeForAddress(address: string, now: number): Promise<Decision> {
    return this.buckets.take(`address:${addressSubject(address)}`, this.limit, now);
  }

  takeForCredential(credentialId: string, now: number): Promise<Decision> {
    return this.buckets.take(`credential:${credentialId}`, this.limit, now);
  }
}

/** The part of a client address that names one client: an IPv4 address, or an IPv6 /64 prefix. */
export function addressSubject(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.process(address);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const prefix = ipaddr.IPv6.networkAddressFromCIDR(`${parsed.toString()}/64`);
  return `${prefix.toString()}/64`;
}
