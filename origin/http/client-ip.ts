import { isIP } from "node:net";
import type { CidrSet } from "./cidr.ts";
import { formatIpv6, ipv4Mapped, ipv6Words, nat64Embedded, parseIpLiteral } from "./ip-address.ts";

/**
 * The client is the socket peer, unless the peer is a trusted proxy; then it is the
 * right-most X-Forwarded-For hop that is not itself a trusted proxy. Hops left of that are
 * client-supplied and never trusted, so a spoofed header from an untrusted peer changes nothing.
 */
export function resolveClientIp(
  remoteAddress: string | undefined,
  forwardedFor: string | undefined,
  trusted: CidrSet,
): string {
  let client = normalizeIp(remoteAddress ?? "") ?? "unknown";
  if (!trusted.contains(client) || !forwardedFor) return client;
  const hops = forwardedFor.split(",");
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = normalizeIp(hops[i]!.trim());
    // A malformed hop ends the walk: what stands left of it cannot be attributed.
    if (!hop) return client;
    client = hop;
    if (!trusted.contains(hop)) return hop;
  }
  return client;
}

/**
 * The address in one spelling, or null if `text` is not one IP address: IPv4 as it is, IPv4-mapped
 * IPv6 in any spelling folded to IPv4, other IPv6 in RFC 5952 form. A zone (`fe80::1%eth0`, as a
 * socket may report a link-local peer) is dropped: it names the local interface, not the peer.
 */
export function normalizeIp(text: string): string | null {
  // The hot path: a socket peer on an IPv4 listener.
  if (isIP(text) === 4) return text;
  const zone = text.indexOf("%");
  return parseIpLiteral(zone < 0 ? text : text.slice(0, zone))?.text ?? null;
}

/**
 * The key a client's failed authentications (and its registrations) are counted under: an IPv4
 * address as it is, an IPv6 address by its /64. One host or site usually holds a whole /64 and can
 * pick any address in it, so counting per IPv6 address would give each such client 2^64 budgets.
 * Addresses that carry an IPv4 address (IPv4-mapped `::ffff:0:0/96` in any spelling, NAT64
 * `64:ff9b::/96`) count as that IPv4 address. The first /64 (`::/64`: loopback, unspecified,
 * IPv4-compatible) holds no site of its own, so there each address is its own group rather than
 * one bucket shared by unrelated clients.
 */
export function addressGroup(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  const zone = ip.indexOf("%");
  const words = ipv6Words((zone < 0 ? ip : ip.slice(0, zone)).toLowerCase());
  const ipv4 = ipv4Mapped(words) ?? nat64Embedded(words);
  if (ipv4 !== null) return ipv4;
  if (words[0] === 0 && words[1] === 0 && words[2] === 0 && words[3] === 0) return formatIpv6(words);
  return `${words
    .slice(0, 4)
    .map((word) => word.toString(16))
    .join(":")}::/64`;
}
