import { isIP } from "node:net";
import type { CidrSet } from "./cidr.ts";

/**
 * DESIGN §7: the client is the socket peer, unless the peer is a trusted proxy; then it is the
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

/** Lower-cased address, with IPv4-mapped IPv6 (`::ffff:a.b.c.d`) folded to IPv4; null if not an IP. */
export function normalizeIp(text: string): string | null {
  const value = text.toLowerCase();
  if (value.startsWith("::ffff:") && isIP(value.slice(7)) === 4) return value.slice(7);
  return isIP(value) === 0 ? null : value;
}

/**
 * The key a client's failed authentications are counted under: an IPv4 address as it is, an IPv6
 * address by its /64. One host or site usually holds a whole /64 and can pick any address in it,
 * so counting per IPv6 address would give each such client 2^64 budgets (the registration limits
 * group IPv6 the same way).
 */
export function addressGroup(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  const [head = "", tail] = ip.split("%")[0]!.split("::");
  const groups = (part: string): string[] =>
    part === "" ? [] : part.split(":").flatMap((group) => (group.includes(".") ? ["0", "0"] : [group]));
  const left = groups(head);
  const right = tail === undefined ? [] : groups(tail);
  const all = [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill("0"), ...right];
  return `${all
    .slice(0, 4)
    .map((group) => Number.parseInt(group, 16).toString(16))
    .join(":")}::/64`;
}
