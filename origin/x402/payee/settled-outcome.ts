/**
 * One settlement run inside its revert-guard slot (revert-guard.ts), the slot released with what
 * the settlement came to, whatever happens: a settle that throws held it too. A settlement answered
 * `settlement_pending` is still in flight, and may still revert: its slot is kept until the chain
 * decides, or a payer could put any number in flight behind pending answers and drain them all. A
 * revert is asked `usedElsewhere` first: one whose authorization another transaction used (a
 * front-run, which paid the seller) is no revert of the payer's, and is released as not reverted.
 */
import { X402_REASONS } from "../reasons.ts";
import type { SettleSlot } from "./revert-guard.ts";
import type { SettlementEnd, SettleOutcome, SettleResponse } from "./settle-answer.ts";

export async function settledOutcome(
  slot: SettleSlot,
  settle: () => Promise<SettleOutcome>,
  usedElsewhere: () => Promise<boolean>,
): Promise<SettleOutcome> {
  /** A revert whose authorization another transaction used counts as none; a failed read counts it. */
  const counted = async (end: SettlementEnd): Promise<SettlementEnd> =>
    end === "reverted" && (await usedElsewhere().catch(() => false)) ? "not_reverted" : end;
  let outcome: SettleOutcome;
  try {
    outcome = await settle();
  } catch (error) {
    slot.release("not_reverted");
    throw error;
  }
  if (outcome.kind === "failed" && outcome.stillInFlight) {
    void outcome.stillInFlight.then(counted).then((end) => slot.release(end));
    return outcome;
  }
  const reverted = isReverted(outcome);
  const end = await counted(reverted ? "reverted" : "not_reverted");
  slot.release(end);
  // Our transaction moved nothing, but the payer's payment was made: the answer says so.
  if (reverted && end === "not_reverted")
    return { ...outcome, response: usedElsewhereAnswer(outcome.response) };
  return outcome;
}

/**
 * The answer of a settlement that moved nothing (reverted, or never mined) while another
 * transaction used its authorization: still its own reason with our transaction
 * (`invalid_exact_evm_transaction_failed`, `broadcast_refused`: ours moved nothing, as the
 * settlement's status says), and in `errorMessage`, which the official client's SettleError
 * carries, that the payer's payment reached its payee by that other transaction, so that neither
 * a seller nor a payer takes it for a payment that never happened.
 */
export function usedElsewhereAnswer(response: SettleResponse): SettleResponse {
  return {
    ...response,
    errorMessage: `transaction ${response.transaction} moved nothing: another transaction used this authorization, and the payment reached its payee by that transaction, not by this settlement`,
  };
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
