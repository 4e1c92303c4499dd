import { RecencyMap } from "../../shared/recency-map.ts";

/**
 * Ours: which token ids authenticated from which client (IPv4 address or IPv6 /64) lately, kept in
 * memory per node. A client's failures past the pre-auth limit (docs/api.md#rate-limits) then lock
 * out only the tokens that have not worked from its address: agents behind one shared NAT,
 * serverless egress or CI runner keep working while a neighbour sends bad tokens (the device-cookie
 * defence against lockout, OWASP). Only a request that authenticated and that the per-agent tier
 * admitted enters the set, so unauthenticated requests cannot fill it, nor can a token past its own
 * limit; its size is fixed, the pair seen least recently dropped first, and one token holds at most
 * `maxSourcesPerToken` addresses (its least recently seen dropped first), so a token used from many
 * addresses cannot fill the node's set either. A token id that fails from an address is forgotten
 * there.
 */
export const RECENT_AUTHENTICATIONS = {
  /** How long a success from a client keeps its token working there past the limit. */
  windowSeconds: 24 * 60 * 60,
  /** About 400 bytes a pair, measured (V8 strings, the Map and its order): at most ~20 MiB per node. */
  maxEntries: 50_000,
  /** Addresses one token is remembered at: an agent on a few runners or egress ranges. */
  maxSourcesPerToken: 16,
} as const;

export type RecentAuthenticationsOptions = {
  windowSeconds?: number;
  maxEntries?: number;
  maxSourcesPerToken?: number;
  now?: () => number;
};

export class RecentAuthentications {
  private readonly windowSeconds: number;
  private readonly maxEntries: number;
  private readonly maxSourcesPerToken: number;
  private readonly now: () => number;
  /** `source token_id` → the second (Unix) of the last success, the least recently seen first. */
  private readonly seen = new RecencyMap<string, number>();
  /** token_id → its sources in the set, least recently seen first. */
  private readonly sourcesOf = new Map<string, Set<string>>();
  /** source → the token ids in the set there, for the edge's lockouts (tokensFrom). */
  private readonly tokensAt = new Map<string, Set<string>>();

  constructor(options: RecentAuthenticationsOptions = {}) {
    this.windowSeconds = options.windowSeconds ?? RECENT_AUTHENTICATIONS.windowSeconds;
    this.maxEntries = options.maxEntries ?? RECENT_AUTHENTICATIONS.maxEntries;
    this.maxSourcesPerToken = options.maxSourcesPerToken ?? RECENT_AUTHENTICATIONS.maxSourcesPerToken;
    this.now = options.now ?? Date.now;
  }

  /**
   * Records that `tokenId` authenticated from `source` now. Call only after a success the
   * per-agent tier admitted.
   */
  remember(source: string, tokenId: string): void {
    const key = `${source} ${tokenId}`;
    if (key === this.seen.newestKey()) {
      // Already the most recently seen pair (and its source its token's newest): only the time moves.
      this.seen.set(key, this.second());
      return;
    }
    if (this.seen.has(key)) {
      // Its source is re-added below, so a token's Set keeps its sources least recently seen first.
      this.sourcesOf.get(tokenId)?.delete(source);
    } else {
      const sources = this.sourcesOf.get(tokenId);
      if (sources && sources.size >= this.maxSourcesPerToken) {
        const oldest = sources.values().next();
        if (!oldest.done) this.forget(oldest.value, tokenId);
      }
      const oldest = this.seen.size >= this.maxEntries ? this.seen.oldest() : undefined;
      if (oldest) this.forgetKey(oldest.key);
    }
    this.seen.set(key, this.second());
    addToSet(this.sourcesOf, tokenId, source);
    addToSet(this.tokensAt, source, tokenId);
  }

  /** Whether `tokenId` authenticated from `source` within the window. */
  has(source: string, tokenId: string): boolean {
    const at = this.seen.get(`${source} ${tokenId}`);
    return at !== undefined && this.second() - at < this.windowSeconds;
  }

  /**
   * The token ids that authenticated from `source` within the window, or undefined when there are
   * more than `atMost`: what the edge may pass from a locked-out address (edge-worker/lockouts.ts).
   */
  tokensFrom(source: string, atMost: number): string[] | undefined {
    const tokens = this.tokensAt.get(source);
    if (tokens === undefined) return [];
    if (tokens.size > atMost) return undefined;
    return [...tokens].filter((tokenId) => this.has(source, tokenId));
  }

  /** Drops the pair: `tokenId` failed from `source`, so it no longer counts as working there. */
  forget(source: string, tokenId: string): void {
    this.forgetKey(`${source} ${tokenId}`);
  }

  get size(): number {
    return this.seen.size;
  }

  private forgetKey(key: string): void {
    if (!this.seen.delete(key)) return;
    // Neither a source (an address, a /64) nor a token id holds a space.
    const split = key.lastIndexOf(" ");
    const tokenId = key.slice(split + 1);
    const source = key.slice(0, split);
    deleteFromSet(this.sourcesOf, tokenId, source);
    deleteFromSet(this.tokensAt, source, tokenId);
  }

  private second(): number {
    return Math.floor(this.now() / 1000);
  }
}

/** Adds `value` to the set kept under `key`, making the set on first use. */
function addToSet(sets: Map<string, Set<string>>, key: string, value: string): void {
  const set = sets.get(key);
  if (set) set.add(value);
  else sets.set(key, new Set([value]));
}

/** Deletes `value` from the set kept under `key`, and the set once it is empty. */
function deleteFromSet(sets: Map<string, Set<string>>, key: string, value: string): void {
  const set = sets.get(key);
  set?.delete(value);
  if (set?.size === 0) sets.delete(key);
}
