import { isIP } from "node:net";

/**
 * IP literals, parsed strictly: one address, no port, no brackets, no zone, no list, no
 * whitespace, no leading zeros in IPv4 (node's isIP), and every spelling of one IPv6 address
 * brought to one form, so that a client cannot pick a spelling to pick a bucket.
 */

/** The eight 16-bit words of an IPv6 literal that isIP already accepted (no zone). */
export function ipv6Words(text: string): number[] {
  const [head = "", tail] = text.split("::");
  const words = (part: string): number[] => {
    if (part === "") return [];
    const out: number[] = [];
    for (const group of part.split(":")) {
      if (group.includes(".")) {
        const [a = 0, b = 0, c = 0, d = 0] = group.split(".").map(Number);
        out.push((a << 8) | b, (c << 8) | d);
      } else out.push(Number.parseInt(group, 16));
    }
    return out;
  };
  const left = words(head);
  const right = tail === undefined ? [] : words(tail);
  return [...left, ...Array<number>(Math.max(0, 8 - left.length - right.length)).fill(0), ...right];
}

/** `::ffff:a.b.c.d` in any spelling: the IPv4 address it carries, else null. */
export function ipv4Mapped(words: readonly number[]): string | null {
  const mapped =
    words[0] === 0 &&
    words[1] === 0 &&
    words[2] === 0 &&
    words[3] === 0 &&
    words[4] === 0 &&
    words[5] === 0xffff;
  return mapped ? embeddedIpv4(words) : null;
}

/** The well-known NAT64 prefix 64:ff9b::/96 (RFC 6052): the IPv4 address it carries, else null. */
export function nat64Embedded(words: readonly number[]): string | null {
  const nat64 =
    words[0] === 0x64 &&
    words[1] === 0xff9b &&
    words[2] === 0 &&
    words[3] === 0 &&
    words[4] === 0 &&
    words[5] === 0;
  return nat64 ? embeddedIpv4(words) : null;
}

function embeddedIpv4(words: readonly number[]): string {
  const high = words[6] ?? 0;
  const low = words[7] ?? 0;
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`;
}

/** RFC 5952 text: lowercase, no leading zeros, the longest run of two or more zero words as `::`. */
export function formatIpv6(words: readonly number[]): string {
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLength) {
      bestStart = i;
      bestLength = j - i;
    }
    i = j;
  }
  const hex = (list: readonly number[]): string => list.map((word) => word.toString(16)).join(":");
  if (bestStart < 0) return hex(words);
  return `${hex(words.slice(0, bestStart))}::${hex(words.slice(bestStart + bestLength))}`;
}

export type ParsedIp = { family: 4; text: string } | { family: 6; text: string; words: number[] };

/**
 * One IP literal and nothing else, or null. IPv4-mapped IPv6 in every spelling folds to IPv4;
 * IPv6 comes back in RFC 5952 form. A zone (`%eth0`) is refused: it names an interface of the
 * sender, not an address.
 */
export function parseIpLiteral(text: string): ParsedIp | null {
  const family = isIP(text);
  if (family === 4) return { family: 4, text };
  if (family !== 6 || text.includes("%")) return null;
  const words = ipv6Words(text.toLowerCase());
  const mapped = ipv4Mapped(words);
  if (mapped !== null) return { family: 4, text: mapped };
  return { family: 6, text: formatIpv6(words), words };
}
