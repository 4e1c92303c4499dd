/**
 * The funding gate of the wallet an operation pays into (docs/api.md, "The funding gate"): the
 * faucet's payout wallet, and a transfer's recipient when it is one of the service's wallets. Its
 * balance after the move is what it holds (on chain, plus what is on its way to it) and the value.
 */
import { ceilingApplies, evaluateWalletGate, type GateRefusal, type WalletGateRow } from "../funding/gate.ts";
import { CHAIN_DOWN } from "./not-signed.ts";
import type { NotNow } from "./operation.ts";

/**
 * The gate's verdict on the receiving wallet `row` (null: not one of the service's, which the gate
 * refuses), holding `heldWei` before `valueWei` arrives. The executor reads what it holds only when
 * a ceiling applies; if it could not (the chain did not answer), that is not a decision: not now.
 */
export function receivingGate(
  row: WalletGateRow | null,
  heldWei: bigint | undefined,
  valueWei: bigint,
): GateRefusal | NotNow | null {
  if (ceilingApplies(row)) {
    if (heldWei === undefined) return { notNow: CHAIN_DOWN };
    return evaluateWalletGate(row, heldWei + valueWei);
  }
  // No ceiling: the verdict does not turn on the balance (gate.ts ceilingApplies).
  return evaluateWalletGate(row, valueWei);
}
