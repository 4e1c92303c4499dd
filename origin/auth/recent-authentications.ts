/**
 * Ours: which token ids authenticated from which client (IPv4 address or IPv6 /64) lately, kept in
 * memory per node. A client's failures past the pre-auth limit (SPEC "Limits") then lock out only
 * the tokens that have not worked from its address: agents behind one shared NAT, serverless
 * egress or CI runner keep working while a neighbour sends bad tokens (the device-cookie defence
 * against lockout, OWASP). Only a successful authentication enters the set, so unauthenticated
 * requests cannot fill it; its size is fixed, the pair seen least recently dropped first.
 */
export const RECENT_AUTHENTICATIONS = {
  /** How long a success from a client keeps its token working there past the limit. */
  windowSeconds: 24 * 60 * 60,
  /** About 300 bytes a pair, measured (V8 strings and the Map): at most ~15 MiB per node. */
  maxEntries: 50_000,
} as const;

export type RecentAuthenticationsOptions = {
  windowSeconds?: number;
  maxEntries?: number;
  now?: () => number;
};

export class RecentAuthentications {
  private readonly windowSeconds: number;
  private readonly maxEntries: number;
  private readonly now: () => number;
  /** `source token_id` → the second (Unix) of the last success; Map order is recency order. */
  private readonly seen = new Map<string, number>();

  constructor(options: RecentAuthenticationsOptions = {}) {
    this.windowSeconds = options.windowSeconds ?? RECENT_AUTHENTICATIONS.windowSeconds;
    this.maxEntries = options.maxEntries ?? RECENT_AUTHENTICATIONS.maxEntries;
    this.now = options.now ?? Date.now;
  }

  /** Records that `tokenId` authenticated from `source` now. Call only after a success. */
  remember(source: string, tokenId: string): void {
    const key = `${source} ${tokenId}`;
    // Re-inserted, so the Map's first key is always the least recently seen pair.
    if (!this.seen.delete(key) && this.seen.size >= this.maxEntries) {
      const oldest = this.seen.keys().next();
      if (!oldest.done) this.seen.delete(oldest.value);
    }
    this.seen.set(key, this.second());
  }

  /** Whether `tokenId` authenticated from `source` within the window. */
  has(source: string, tokenId: string): boolean {
    const at = this.seen.get(`${source} ${tokenId}`);
    return at !== undefined && this.second() - at < this.windowSeconds;
  }

  get size(): number {
    return this.seen.size;
  }

  private second(): number {
    return Math.floor(this.now() / 1000);
  }
}
