import { BlockList, isIP } from 'node:net';
import type { Context } from 'koa';

/*
 * Who is calling, as an address: the one function every reader of the client address uses (the API's
 * refusal limiter, the console's sign-in budget, the access log, the console's sign-in audit rows).
 *
 * Off by default (`api.trustProxy` empty), it is the connection's address, and `X-Forwarded-For` is
 * ignored: anyone can send that header. With `api.trustProxy` set to the proxies' addresses or CIDRs, a
 * connection from one of them is read through the header: the client is the right-most address in it that
 * is not a listed proxy. Each proxy appends the address it received the connection from, so everything to
 * the right of the first untrusted entry was written by our own proxies, and everything to its left by
 * whoever sent the request (a client can send `X-Forwarded-For: 1.2.3.4` to a proxy, which keeps it and
 * appends the real one: taking the left-most address would let every request choose its own budget).
 */

/** Hops read from the right of `X-Forwarded-For`: more proxies than this in front of one appliance is no setup. */
const MAX_HOPS = 32;

/** Which connections are proxies whose `X-Forwarded-For` is believed. */
export interface TrustedProxies {
  trusts(address: string): boolean;
  /** Whether any proxy is listed: off, the header is never read. */
  readonly any: boolean;
}

/** An IPv6 form of an IPv4 address (`::ffff:10.0.0.1`, what a dual-stack socket reports) as IPv4. */
export function plainAddress(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  return mapped ? mapped[1]! : address;
}

/** Why an entry of `api.trustProxy` is not an address or a CIDR, or null when it is one. */
export function proxyEntryProblem(entry: string): string | null {
  const [address, bits, ...rest] = entry.split('/');
  const family = isIP(address ?? '');
  if (family === 0 || rest.length > 0) return 'is not an IP address or a CIDR (10.0.0.0/8, fd00::/8)';
  if (bits === undefined) return null;
  // Connections from IPv4 clients are compared as IPv4 (plainAddress): a mapped range would match none.
  if (plainAddress(address!) !== address)
    return 'is an IPv4-mapped IPv6 range: write it as IPv4 (10.0.0.0/8)';
  const max = family === 4 ? 32 : 128;
  if (!/^\d{1,3}$/.test(bits) || Number(bits) > max) return `has a prefix length that is not 0 to ${max}`;
  return null;
}

/** The matcher of `api.trustProxy`'s entries (each checked by the configuration: `proxyEntryProblem`). */
export function trustedProxies(entries: readonly string[]): TrustedProxies {
  const list = new BlockList();
  for (const entry of entries) {
    const [address, bits] = entry.split('/') as [string, string | undefined];
    const plain = plainAddress(address);
    const type = isIP(plain) === 4 ? 'ipv4' : 'ipv6';
    if (bits === undefined) list.addAddress(plain, type);
    else list.addSubnet(plain, Number(bits), type);
  }
  return {
    any: entries.length > 0,
    trusts(address) {
      const plain = plainAddress(address);
      const family = isIP(plain);
      return family !== 0 && list.check(plain, family === 4 ? 'ipv4' : 'ipv6');
    },
  };
}

/** An entry of `X-Forwarded-For` as an address: `[v6]:port` and `v4:port` (some proxies add the port) too. */
function hopAddress(entry: string): string | null {
  const trimmed = entry.trim();
  if (isIP(trimmed)) return plainAddress(trimmed);
  const bracketed = /^\[([0-9a-fA-F:.]+)\](?::\d+)?$/.exec(trimmed);
  if (bracketed && isIP(bracketed[1]!) === 6) return plainAddress(bracketed[1]!);
  const withPort = /^(\d+\.\d+\.\d+\.\d+):\d+$/.exec(trimmed);
  if (withPort && isIP(withPort[1]!) === 4) return withPort[1]!;
  return null;
}

/**
 * The client's address from the connection's (`remote`) and the `X-Forwarded-For` header's values: the
 * connection's unless it comes from a trusted proxy; then the right-most entry that is not a trusted proxy.
 * An entry that is no address stops the walk at the proxy that wrote it (a proxy of ours that forwards
 * garbage is misconfigured; nothing to its left can be believed). All trusted: the left-most of them.
 */
export function resolveClientAddress(
  remote: string,
  forwardedFor: string | string[] | undefined,
  proxies: TrustedProxies,
): string {
  const connection = plainAddress(remote);
  if (!proxies.any || !proxies.trusts(connection) || forwardedFor === undefined) return connection;
  const hops = (Array.isArray(forwardedFor) ? forwardedFor.join(',') : forwardedFor).split(',');
  let client = connection;
  for (let i = hops.length - 1, seen = 0; i >= 0 && seen < MAX_HOPS; i--, seen++) {
    const hop = hopAddress(hops[i]!);
    if (hop === null) return client;
    if (!proxies.trusts(hop)) return hop;
    client = hop;
  }
  return client;
}

const RESOLVED = Symbol('clientAddress');

/**
 * The address of the client of this request (see above). Computed once per request by the request frame
 * (request-context.ts, which knows the configured proxies) and read here; the socket's address if the frame
 * did not run (a router mounted alone in a test).
 */
export function clientAddress(ctx: Context): string {
  const state = ctx.state as Record<symbol, string | undefined>;
  return state[RESOLVED] ?? plainAddress(ctx.req.socket.remoteAddress ?? '');
}

/** Records this request's client address: the request frame's job, once, before any reader runs. */
export function settleClientAddress(ctx: Context, proxies: TrustedProxies): string {
  const address = resolveClientAddress(
    ctx.req.socket.remoteAddress ?? '',
    ctx.req.headers['x-forwarded-for'],
    proxies,
  );
  (ctx.state as Record<symbol, string>)[RESOLVED] = address;
  return address;
}
