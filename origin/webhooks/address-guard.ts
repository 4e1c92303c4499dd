/**
 * The SSRF guard of webhook delivery (docs/security.md#webhooks): an operator's URL never reaches
 * a private, loopback, link-local or otherwise internal address, checked on every address a name
 * resolves to, and again by the lookup the connection itself uses, so a name that resolves to a
 * public address when checked and to a private one when connecting is still refused.
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { BlockList, isIP } from "node:net";
import { hasControlCharacter } from "../../shared/control-characters.ts";

const blocked = new BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8], // "this network", including 0.0.0.0, which connects to the host itself
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, cloud metadata at 169.254.169.254
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15], // benchmarking
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, and the broadcast address
] as const) {
  blocked.addSubnet(network, prefix, "ipv4");
}
for (const [network, prefix] of [
  ["::", 128], // unspecified
  ["::1", 128],
  ["fc00::", 7], // unique-local
  ["fe80::", 10], // link-local
  ["fec0::", 10], // the old site-local
  ["ff00::", 8], // multicast
  ["64:ff9b:1::", 48], // NAT64 for local use: translates to whatever the operator's network chose
  ["100::", 64], // discard-only
] as const) {
  blocked.addSubnet(network, prefix, "ipv6");
}

/** The eight 16-bit groups of an IPv6 address (a trailing dotted IPv4 included), or undefined. */
export function ipv6Groups(address: string): number[] | undefined {
  if (isIP(address) !== 6) return undefined;
  let text = address.toLowerCase();
  const dotted = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const parse = (part: string | undefined): number[] =>
    part ? part.split(":").map((group) => Number.parseInt(group, 16)) : [];
  const left = parse(head);
  const right = parse(tail);
  const groups =
    tail === undefined ? left : [...left, ...new Array(8 - left.length - right.length).fill(0), ...right];
  return groups.length === 8 && groups.every((group) => group >= 0 && group <= 0xffff) ? groups : undefined;
}

const ipv4Of = (high: number, low: number): string => [high >> 8, high & 255, low >> 8, low & 255].join(".");

/**
 * The IPv4 addresses an IPv6 one carries, each of which reaches (or is translated to) that IPv4
 * host: IPv4-mapped ::ffff:0:0/96 and IPv4-translated ::ffff:0:0:0/96, the deprecated
 * IPv4-compatible ::/96, NAT64's 64:ff9b::/96, 6to4's 2002::/16 (the relay's IPv4 in bits 16–47)
 * and Teredo's 2001::/32 (the server's IPv4 in bits 32–63, the client's inverted in the last 32).
 */
export function embeddedIpv4(groups: readonly number[]): string[] {
  const [g0, g1, g2, g3, g4, g5, g6, g7] = groups as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const zeros = (from: number, to: number): boolean => groups.slice(from, to).every((group) => group === 0);
  if (zeros(0, 5) && (g5 === 0xffff || g5 === 0)) return [ipv4Of(g6, g7)];
  if (zeros(0, 4) && g4 === 0xffff && g5 === 0) return [ipv4Of(g6, g7)];
  if (g0 === 0x64 && g1 === 0xff9b && zeros(2, 6)) return [ipv4Of(g6, g7)];
  if (g0 === 0x2002) return [ipv4Of(g1, g2)];
  if (g0 === 0x2001 && g1 === 0) return [ipv4Of(g2, g3), ipv4Of(g6 ^ 0xffff, g7 ^ 0xffff)];
  return [];
}

/** True for an address a webhook must not reach (an unparsable one included). */
export function isPrivateAddress(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  const family = isIP(bare);
  if (family === 4) return blocked.check(bare, "ipv4");
  if (family === 6) {
    const groups = ipv6Groups(bare);
    if (!groups) return true;
    // An IPv6 form of an IPv4 address is refused like the IPv4 it carries.
    if (embeddedIpv4(groups).some((v4) => blocked.check(v4, "ipv4"))) return true;
    return blocked.check(bare, "ipv6");
  }
  return true;
}

export type Resolve = (hostname: string) => Promise<string[]>;

/**
 * One lookup of a name at a time, its answer shared by every caller that asks while it is out;
 * the next caller after it settles looks up anew, so nothing is kept. The system resolver runs on
 * libuv's thread pool (four threads), which the origin's file and crypto work share, and a lookup
 * that hangs (the name's DNS servers not answering: the system's retries take tens of seconds)
 * holds its thread long after the attempt that started it timed out. Unshared, each attempt to
 * such a name took a thread, twice (its check and its connection), and four stalled the pool;
 * shared, a name holds one thread however many deliveries wait for it.
 */
export function sharedLookups(resolve: Resolve): Resolve {
  const out = new Map<string, Promise<string[]>>();
  return (hostname) => {
    const name = hostname.toLowerCase();
    let pending = out.get(name);
    if (!pending) {
      pending = resolve(hostname).finally(() => out.delete(name));
      out.set(name, pending);
    }
    return pending;
  };
}

/** Every address the system resolver gives the name. */
export const systemResolve: Resolve = sharedLookups(
  (hostname) =>
    new Promise((resolve, reject) => {
      dnsLookup(hostname, { all: true, verbatim: true }, (error, addresses: LookupAddress[]) => {
        if (error) reject(error);
        else resolve(addresses.map((each) => each.address));
      });
    }),
);

export type UrlCheck =
  | { ok: true }
  | { ok: false; code: "bad_url" | "bad_scheme" | "private_address" | "unresolvable"; message: string };

/**
 * Whether a webhook may be sent to `url`: http or https, and (unless private addresses are
 * allowed) every address of its host public. Used by `add` up front and by the delivery worker.
 */
export async function checkWebhookUrl(
  url: string,
  params: { allowPrivate: boolean; resolve?: Resolve },
): Promise<UrlCheck> {
  // The URL parser drops or percent-encodes these, so the stored text and the URL called would
  // differ; and Postgres cannot store a NUL at all.
  if (/\s/u.test(url) || hasControlCharacter(url)) {
    return {
      ok: false,
      code: "bad_url",
      message: "no space or control character in the URL (percent-encode it)",
    };
  }
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, code: "bad_url", message: "not a URL" };
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    return { ok: false, code: "bad_scheme", message: "only http: and https: URLs" };
  }
  if (parsed.username || parsed.password) {
    return { ok: false, code: "bad_url", message: "no credentials in the URL" };
  }
  if (params.allowPrivate) return { ok: true };
  const host = parsed.hostname.replace(/^\[|\]$/g, "");
  let addresses: string[];
  if (isIP(host)) addresses = [host];
  else {
    try {
      addresses = await (params.resolve ?? systemResolve)(host);
    } catch {
      return { ok: false, code: "unresolvable", message: `${host} does not resolve` };
    }
  }
  if (addresses.length === 0) return { ok: false, code: "unresolvable", message: `${host} does not resolve` };
  const bad = addresses.find(isPrivateAddress);
  if (bad !== undefined) {
    return { ok: false, code: "private_address", message: `${host} resolves to a private address` };
  }
  return { ok: true };
}

/** What node's http and https agents call to resolve a name (net.connect's `lookup` option). */
export type ConnectLookup = (
  hostname: string,
  options: { all?: boolean; family?: number | string },
  callback: (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void,
) => void;

export class PrivateAddressError extends Error {
  readonly code = "EPRIVATEADDRESS";
  constructor(hostname: string) {
    super(`${hostname} resolved to a private address at connect time`);
    this.name = "PrivateAddressError";
  }
}

/**
 * The lookup the delivery's socket uses: it resolves with `resolve` and, when `guard` is on,
 * refuses the connection when any address is private. Node skips `lookup` for an IP literal,
 * which checkWebhookUrl refuses before any request.
 */
export function guardedLookup(resolve: Resolve = systemResolve, guard = true): ConnectLookup {
  return (hostname, options, callback) => {
    resolve(hostname).then(
      (addresses) => {
        if (addresses.length === 0 || (guard && addresses.some(isPrivateAddress))) {
          callback(new PrivateAddressError(hostname), options.all ? [] : "");
          return;
        }
        if (options.all) {
          callback(
            null,
            addresses.map((address) => ({ address, family: isIP(address) })),
          );
        } else callback(null, addresses[0]!, isIP(addresses[0]!));
      },
      (error: NodeJS.ErrnoException) => callback(error, options.all ? [] : ""),
    );
  };
}
