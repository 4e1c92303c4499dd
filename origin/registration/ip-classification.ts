import { createHmac } from "node:crypto";
import { BlockList } from "node:net";
import { err, ok, type Result } from "../../shared/result.ts";
import { addressGroup } from "../http/client-ip.ts";
import { nat64Embedded, parseIpLiteral } from "../http/ip-address.ts";

/**
 * The origin refuses a missing, malformed, private or collapsed IP value
 * (docs/api.md#registration-what-a-request-must-be). Only addresses a client on the public internet
 * can hold are accepted:
 *   IPv4: everything but 0/8 (this network, unspecified), 10/8, 100.64/10 (CGNAT), 127/8
 *     (loopback), 169.254/16 (link-local), 172.16/12, 192.0.0/24 (IETF protocol assignments),
 *     192.0.2/24, 198.51.100/24, 203.0.113/24 (documentation), 192.88.99/24 (6to4 relay),
 *     192.168/16, 198.18/15 (benchmarking), 224/4 (multicast), 240/4 (reserved, broadcast; also
 *     the edge provider's pseudo-IPv4 range, which must never stand in for a client).
 *   IPv6: global unicast 2000::/3 only (which leaves out ::, ::1, fc00::/7 unique-local,
 *     fe80::/10 link-local, ff00::/8 multicast, 100::/64 discard), minus 2001::/23 (IETF protocol
 *     assignments, Teredo among them), 2001:db8::/32 and 3fff::/20 (documentation) and 2002::/16
 *     (6to4). IPv4-mapped (`::ffff:0:0/96`) and NAT64 (`64:ff9b::/96`) addresses are judged as
 *     the IPv4 address they carry.
 */
const REFUSED = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  REFUSED.addSubnet(net, prefix, "ipv4");
}
for (const [net, prefix] of [
  ["2001::", 23],
  ["2001:db8::", 32],
  ["2002::", 16],
  ["3fff::", 20],
] as const) {
  REFUSED.addSubnet(net, prefix, "ipv6");
}
const GLOBAL_UNICAST = new BlockList();
GLOBAL_UNICAST.addSubnet("2000::", 3, "ipv6");
const LOOPBACK = new BlockList();
LOOPBACK.addSubnet("127.0.0.0", 8, "ipv4");
LOOPBACK.addAddress("::1", "ipv6");

export type RegistrationIpRefusal = "missing" | "malformed" | "not_public";

export type ClassifyRegistrationIpResult = Result<{ ip: string; group: string }, RegistrationIpRefusal>;

export type ClassifyRegistrationIpParams = {
  /** Local development only (AGENT_REGISTRATION_ALLOW_LOOPBACK): loopback addresses are accepted. */
  allowLoopback: boolean;
};

/**
 * Parses X-svc-Registration-IP strictly (one address: no list, port, zone, brackets or spaces)
 * and accepts it only if it is public. The group is what quotas count: an IPv4 address, or an
 * IPv6 /64 (docs/api.md#registration-quotas-and-counters).
 */
export function classifyRegistrationIp(
  header: string | undefined,
  params: ClassifyRegistrationIpParams,
): ClassifyRegistrationIpResult {
  if (header === undefined || header === "") return err("missing");
  // A list (two headers joined, or a forwarded-for chain) is a collapsed value: refused, never split.
  const parsed = parseIpLiteral(header);
  if (parsed === null) return err("malformed");
  const ip = parsed.family === 6 ? (nat64Embedded(parsed.words) ?? parsed.text) : parsed.text;
  const family = ip.includes(":") ? "ipv6" : "ipv4";
  if (params.allowLoopback && LOOPBACK.check(ip, family)) return ok({ ip, group: addressGroup(ip) });
  const isPublic =
    family === "ipv4"
      ? !REFUSED.check(ip, "ipv4")
      : GLOBAL_UNICAST.check(ip, "ipv6") && !REFUSED.check(ip, "ipv6");
  if (!isPublic) return err("not_public");
  return ok({ ip, group: addressGroup(ip) });
}

/**
 * IP groups are stored only as HMAC-SHA-256 under AGENT_REGISTRATION_IP_SECRET, in hex
 * (docs/api.md#registration-quotas-and-counters).
 */
export function hashIpGroup(secret: string, group: string): string {
  return createHmac("sha256", secret).update(group).digest("hex");
}
