/**
 * The per-key spend of the enclave's UTC day (state-store.ts `daily`): an agent key's transfers and
 * fillers, the settler key's fees. One reading and one counting rule for every op that uses it.
 */
import type { EnclaveState } from "./enclave-state.ts";
import { countsAt } from "./policy-checks.ts";
import { TrackedMap } from "./tracked-map.ts";

/** What `keyRef` has counted on `today` (0 when the record is of an earlier day). */
export function spentToday(state: EnclaveState, keyRef: string, today: string): bigint {
  return countsAt(state.daily.day, today) ? (state.daily.spent.get(keyRef) ?? 0n) : 0n;
}

/** Counts `units` against `keyRef` on `today`; the first count of a later day starts every key at zero. */
export function countSpend(state: EnclaveState, keyRef: string, today: string, units: bigint): void {
  if (!countsAt(state.daily.day, today)) state.daily = { day: today, spent: new TrackedMap() };
  state.daily.spent.set(keyRef, (state.daily.spent.get(keyRef) ?? 0n) + units);
}
