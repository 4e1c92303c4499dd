/**
 * The per-token cap on open event streams (AGENT_EVENTS_STREAMS_PER_TOKEN, docs/events.md#limits):
 * a stream past the cap closes the token's oldest. Kept in memory per origin, so a token holding
 * streams on several origins may hold the cap on each.
 */
export type StreamCap = {
  /**
   * Counts a new stream of `tokenId`, closing the token's oldest ones past the cap; returns the
   * release to call when the stream ends, however it ends.
   */
  open(tokenId: string, close: () => void): () => void;
  /** Open streams of one token. */
  count(tokenId: string): number;
};

export function createStreamCap(perToken: number): StreamCap {
  const open = new Map<string, { close: () => void }[]>();
  return {
    open(tokenId, close) {
      const entry = { close };
      const streams = open.get(tokenId) ?? [];
      open.set(tokenId, streams);
      streams.push(entry);
      while (streams.length > perToken) streams.shift()!.close();
      return () => {
        const current = open.get(tokenId);
        if (!current) return;
        const at = current.indexOf(entry);
        if (at >= 0) current.splice(at, 1);
        if (current.length === 0) open.delete(tokenId);
      };
    },
    count: (tokenId) => open.get(tokenId)?.length ?? 0,
  };
}
