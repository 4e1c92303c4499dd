/**
 * One settlement run inside its revert-guard slot (revert-guard.ts), the slot released with what
 * the settlement came to, whatever happens: a settle that throws held it too. A settlement answered
 * `settlement_pending` is still in flight, and may still revert: its slot is kept until the chain
 * decides, or a payer could put any number in flight behind pending answers and drain them all.
 */
import { X402_REASONS } from "../reasons.ts";
import type { SettleSlot } from "./revert-guard.ts";
import type { SettleOutcome } from "./settle-answer.ts";

export async function settledOutcome(
  slot: SettleSlot,
  settle: () => Promise<SettleOutcome>,
): Promise<SettleOutcome> {
  let outcome: SettleOutcome | undefined;
  try {
    outcome = await settle();
    return outcome;
  } finally {
    if (outcome?.kind === "failed" && outcome.stillInFlight)
      void outcome.stillInFlight.then((end) => slot.release(end));
    else slot.release(outcome !== undefined && isReverted(outcome) ? "reverted" : "not_reverted");
  }
}

/**
 * This presentation's settlement was mined and reverted: settle.ts answers it `failed` with the
 * transaction and `invalid_exact_evm_transaction_failed`. A duplicate naming an earlier reverted
 * one is that one's revert, counted when it happened; a pending one is counted by the payer's
 * database count once the tracker records its receipt.
 */
export function isReverted(outcome: SettleOutcome): boolean {
  return (
    outcome.kind === "failed" &&
    outcome.response.errorReason === X402_REASONS.transactionFailed &&
    outcome.response.transaction !== ""
  );
}
