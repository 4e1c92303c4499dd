/**
 * A position in the event log: the writing transaction's id and the event's id. Events are served
 * in this order, and only below the horizon (docs/events.md#order), so a cursor says "everything
 * at or before me has been served".
 */
export type Cursor = { xid: bigint; id: bigint };

/** Before every event the log can hold. */
export const CURSOR_START: Cursor = { xid: 0n, id: 0n };

/**
 * Every event whose transaction is below `horizon` (the oldest transaction still running when a
 * read's snapshot was taken) and nothing at or after it: ids start at 1, so (horizon, 0) sorts
 * before every event the transaction `horizon` itself may write.
 */
export function horizonCursor(horizon: bigint): Cursor {
  return { xid: horizon, id: 0n };
}

/** Negative, zero or positive as `a` sorts before, with or after `b`. */
export function compareCursors(a: Cursor, b: Cursor): number {
  if (a.xid !== b.xid) return a.xid < b.xid ? -1 : 1;
  if (a.id !== b.id) return a.id < b.id ? -1 : 1;
  return 0;
}

export function laterCursor(a: Cursor, b: Cursor): Cursor {
  return compareCursors(a, b) >= 0 ? a : b;
}
