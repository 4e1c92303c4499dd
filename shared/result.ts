/**
 * The one shape of an outcome that can fail in an expected way, in every program: expected
 * failures are values, not exceptions, and the caller maps each error with an exhaustive switch.
 * In-process only: what goes over a wire keeps its own documented shape.
 */
export type Result<T, E> = { ok: true; value: T } | { ok: false; error: E };

export function ok<T>(value: T): { ok: true; value: T } {
  return { ok: true, value };
}

export function err<E>(error: E): { ok: false; error: E } {
  return { ok: false, error };
}
