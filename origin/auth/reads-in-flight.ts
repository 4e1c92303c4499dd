/**
 * Ours: the token ids whose identity is being read for each client address (IPv4 address or IPv6
 * /64) right now, for requests that neither worked from there lately nor came by the lockout
 * allowance. Each of those reads may end in a failure, which the failure limit counts only once it
 * is known; bearerAuth waits while the failures and these reads together fill the limit, so that
 * bad tokens sent at once cost no more reads than bad tokens sent one after another
 * (docs/security.md#floods-and-what-they-still-get). A read of an id already out from there adds
 * nothing: one token sent many times at once waits for nothing. Each read that ends wakes one
 * waiter, and a waiter that leaves without a read of its own wakes the next, so however many wait,
 * each is woken about once per read it waits for. In memory per node; an address holds an entry
 * only while it has a read out or a request waiting.
 */
type Entry = { ids: Map<string, number>; waiters: (() => void)[] };

export class ReadsInFlight {
  private readonly bySource = new Map<string, Entry>();

  /** How many ids other than `tokenId` are being read for `source`. */
  others(source: string, tokenId: string): number {
    const ids = this.bySource.get(source)?.ids;
    if (!ids) return 0;
    return ids.size - (ids.has(tokenId) ? 1 : 0);
  }

  /** Counts a read of `tokenId` for `source`; call what it returns exactly once when it ends. */
  start(source: string, tokenId: string): () => void {
    let entry = this.bySource.get(source);
    if (!entry) {
      entry = { ids: new Map(), waiters: [] };
      this.bySource.set(source, entry);
    }
    entry.ids.set(tokenId, (entry.ids.get(tokenId) ?? 0) + 1);
    return () => {
      const ids = this.bySource.get(source)?.ids;
      const left = (ids?.get(tokenId) ?? 1) - 1;
      if (left > 0) ids?.set(tokenId, left);
      else ids?.delete(tokenId);
      this.wakeNext(source);
    };
  }

  /** Resolves once a read of `source` has ended, or a waiter before this one left it its turn. */
  oneEnds(source: string): Promise<void> {
    const entry = this.bySource.get(source);
    if (!entry) return Promise.resolve();
    return new Promise((resolve) => entry.waiters.push(resolve));
  }

  /** Wakes the next waiter of `source`, if any: one woken that starts no read hands its turn on. */
  wakeNext(source: string): void {
    const entry = this.bySource.get(source);
    if (!entry) return;
    const next = entry.waiters.shift();
    if (entry.ids.size === 0 && entry.waiters.length === 0) this.bySource.delete(source);
    next?.();
  }
}
