import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * The IPv4 address an IPv6 form carries or reaches, where it has one: IPv4-mapped (`::ffff:a.b.c.d`, which
 * the URL parser writes as `::ffff:7f00:1`), IPv4-translated, IPv4-compatible (`::a.b.c.d`, deprecated),
 * NAT64 (`64:ff9b::/96`), 6to4 (`2002:a.b.c.d::`) and Teredo (its server, and its client stored
 * inverted). Each is judged as the IPv4 addresses it leads to.
 */
function carriedIPv4(address: ipaddr.IPv6): ipaddr.IPv4[] {
  const bytes = address.toByteArray();
  const v4 = (from: number, invert = false) =>
    new ipaddr.IPv4(bytes.slice(from, from + 4).map((byte) => (invert ? byte ^ 0xff : byte)));
  switch (address.range()) {
    case 'ipv4Mapped':
    case 'rfc6145':
    case 'rfc6052':
      return [v4(12)];
    case '6to4':
      return [v4(2)];
    case 'teredo':
      return [v4(4), v4(12, true)];
  }
  return bytes.slice(0, 12).every((byte) => byte === 0) ? [v4(12)] : [];
}

const LOCAL_NAT64 = ipaddr.parseCIDR('64:ff9b:1::/48') as [ipaddr.IPv6, number];

/**
 * Whether a webhook may never reach this address (unless the operator allows it): anything but a public unicast address, as
 * ipaddr.js classifies them (private, loopback, link-local and cloud metadata, carrier-grade NAT,
 * multicast, broadcast, unspecified, documentation, benchmarking, unique-local, site-local and the other
 * special-purpose and deprecated ranges), and every IPv6 form that carries or reaches such an IPv4 address.
 * What cannot be parsed is refused.
 */
export function isBlockedAddress(raw: string): boolean {
  if (!ipaddr.isValid(raw)) return true;
  const address = ipaddr.parse(raw);
  if (address.kind() === 'ipv4') return address.range() !== 'unicast';
  // Local-use NAT64 (RFC 8215) puts the IPv4 address around a reserved octet, where an operator's own
  // translator may route it anywhere: refused whole.
  if (address.match(LOCAL_NAT64)) return true;
  const carried = carriedIPv4(address as ipaddr.IPv6);
  if (carried.length > 0) return carried.some((ipv4) => ipv4.range() !== 'unicast');
  return address.range() !== 'unicast';
}

export type UrlVerdict = { ok: true } | { ok: false; reason: string };

/** The operator's settings of the address policy (docs/security.md). */
export interface AddressSettings {
  /** Endpoints of both modes may reach private addresses: the operator's receivers are internal. */
  allowPrivateAddresses: boolean;
  /** Test-mode endpoints may: a development box whose receivers run beside it. */
  allowPrivateAddressesInTestMode: boolean;
}

/**
 * Whether an endpoint may reach addresses the policy refuses. A tenant's endpoint may not, in either mode,
 * unless the operator opted in: its deliveries' answers are readable through the API, so it would be a read
 * channel into the operator's network. A temporary endpoint may: only `svc webhooks listen`, run by the
 * operator on the box, makes one, and it points at that command's own receiver on loopback.
 */
export function mayReachPrivateAddresses(
  mode: 'live' | 'test',
  temporary: boolean,
  settings: AddressSettings,
): boolean {
  return (
    temporary ||
    settings.allowPrivateAddresses ||
    (mode === 'test' && settings.allowPrivateAddressesInTestMode)
  );
}

const REFUSED_REASON =
  'resolves to a private, loopback, link-local or metadata address, which webhooks do not deliver to unless the operator allows it';

/**
 * An endpoint URL: http(s), no user name or password; in live mode https. Unless it may reach private
 * addresses, its host must resolve only to public ones. A test-mode host that does not resolve yet is
 * accepted (a developer's tunnel may come up later); live mode refuses it. The dispatcher checks again at
 * every connection, since DNS can change after this check.
 */
export async function checkWebhookUrl(
  raw: string,
  mode: 'live' | 'test',
  reachPrivate: boolean,
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
  if (reachPrivate) return { ok: true };
  if (mode === 'live' && url.protocol !== 'https:')
    return { ok: false, reason: 'must use https in live mode' };
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((entry) => entry.address);
  } catch {
    if (mode === 'test') return { ok: true };
    return { ok: false, reason: `has a host (${host}) that does not resolve` };
  }
  if (addresses.length === 0 || addresses.some(isBlockedAddress))
    return { ok: false, reason: REFUSED_REASON };
  return { ok: true };
}
