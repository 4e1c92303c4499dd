/**
 * The key the edge remembers an origin's answer to a client by, where the origin counts that
 * client by its IP group (docs/api.md#registration-quotas-and-counters: an IPv4 address, or an
 * IPv6 /64). Keyed by the whole IPv6 address, a client refused for its /64 came back from the
 * next address of it, and the next, each reaching the origin, so a /64's 2^64 addresses made the
 * edge's memory of a refusal worth nothing.
 *
 * Never coarser than the origin's group, so the edge refuses no client the origin would let in:
 * IPv4 addresses, and the IPv6 addresses the origin groups by an IPv4 address or by the whole
 * address (::/64: IPv4-mapped and -compatible; NAT64, 64:ff9b::/96), are keys by themselves.
 * Runs in workerd: no Node built-ins.
 */

/** The client's key: its IPv6 /64 (`2a00:1450:4001:77::/64`), or the address itself. */
export function addressGroupKey(address: string): string {
  if (!address.includes(":")) return address;
  const words = ipv6Words(address);
  if (words === undefined) return address;
  const [w0, w1, w2, w3] = words as [number, number, number, number];
  if (w0 === 0 && w1 === 0 && w2 === 0 && w3 === 0) return address;
  if (w0 === 0x64 && w1 === 0xff9b) return address;
  return `${[w0, w1, w2, w3].map((word) => word.toString(16)).join(":")}::/64`;
}

const HEX_WORD = /^[0-9a-f]{1,4}$/i;
const DOTTED = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

/** The eight 16-bit words of an IPv6 literal (`::` and a dotted IPv4 tail allowed), or undefined. */
function ipv6Words(text: string): number[] | undefined {
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const head = parseWords(halves[0]!);
  const tail = halves.length === 2 ? parseWords(halves[1]!) : [];
  if (head === undefined || tail === undefined) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 2 ? missing < 1 : missing !== 0) return undefined;
  return [...head, ...Array<number>(missing).fill(0), ...tail];
}

/** The words of one side of `::`, the last of them perhaps a dotted IPv4 address (two words). */
function parseWords(part: string): number[] | undefined {
  if (part === "") return [];
  const words: number[] = [];
  const pieces = part.split(":");
  for (const [i, piece] of pieces.entries()) {
    const dotted = i === pieces.length - 1 ? DOTTED.exec(piece) : null;
    if (dotted) {
      const bytes = dotted.slice(1).map(Number);
      if (bytes.some((byte) => byte > 255)) return undefined;
      words.push((bytes[0]! << 8) | bytes[1]!, (bytes[2]! << 8) | bytes[3]!);
    } else if (HEX_WORD.test(piece)) {
      words.push(Number.parseInt(piece, 16));
    } else {
      return undefined;
    }
  }
  return words;
}
