/** Daily limits reset at UTC midnight (docs/api.md#conventions). */
export function startOfUtcDay(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()));
}

/** Whole seconds until the next UTC midnight (at least 1). */
export function secondsToNextUtcDay(now: Date): number {
  const next = startOfUtcDay(now).getTime() + 86_400_000;
  return Math.max(1, Math.ceil((next - now.getTime()) / 1000));
}

/** The UTC calendar day of `at`, as Postgres reads a date: "2026-11-26". */
export function utcDate(at: Date): string {
  return at.toISOString().slice(0, 10);
}
