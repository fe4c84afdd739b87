import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/** Addresses a live-mode webhook may never reach: private, loopback, link-local (cloud metadata), and the like. */
const blocked = new BlockList();
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  blocked.addSubnet(network, prefix, 'ipv4');
}
for (const [network, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
  ['fd00:ec2::254', 128],
] as const) {
  blocked.addSubnet(network, prefix, 'ipv6');
}

export function isBlockedAddress(raw: string): boolean {
  // An IPv4-mapped IPv6 address (::ffff:10.0.0.1) is judged as the IPv4 address it carries.
  const address = raw.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, '$1');
  const family = isIP(address);
  if (family === 0) return true;
  return blocked.check(address, family === 4 ? 'ipv4' : 'ipv6');
}

export type UrlVerdict = { ok: true } | { ok: false; reason: string };

/**
 * Test mode accepts any http(s) URL, so developers can point at localhost. Live mode wants https and a host
 * that resolves only to public addresses, unless the operator allows private ones. The dispatcher checks
 * again at connection time, since DNS can change after this check.
 */
export async function checkWebhookUrl(
  raw: string,
  mode: 'live' | 'test',
  allowPrivate: boolean,
): Promise<UrlVerdict> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, reason: 'is not a valid absolute URL' };
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:')
    return { ok: false, reason: 'must use http or https' };
  if (url.username || url.password) return { ok: false, reason: 'must not carry a user name or password' };
  if (mode === 'test' || allowPrivate) return { ok: true };
  if (url.protocol !== 'https:') return { ok: false, reason: 'must use https in live mode' };
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((entry) => entry.address);
  } catch {
    return { ok: false, reason: `has a host (${host}) that does not resolve` };
  }
  if (addresses.length === 0 || addresses.some(isBlockedAddress)) {
    return {
      ok: false,
      reason:
        'resolves to a private, loopback, link-local or metadata address, which live mode does not deliver to',
    };
  }
  return { ok: true };
}
