import type { FeeOracle } from "../chain/fees.ts";
import type { BroadcastLane } from "../outbox/index.ts";

/**
 * What the money routes need beyond the infrastructure, built once the origin has checked its
 * configuration against the enclave's sealed policy.
 */
export type MoneyRuntime = {
  fees: FeeOracle;
  /** The genesis bridge operator, lowercase: never a recipient. */
  operatorPool: string;
  /** The faucet treasury the enclave signs payouts with; absent without a configured treasury. */
  treasury: { address: string; keyRef: string } | undefined;
  /** Called once a transaction is in flight (wakes the transaction tracker). */
  onInFlight: () => void;
  /**
   * The node's one lane for the faucet's and transfers' broadcasts (outbox/lane.ts):
   * each batch's transactions after the last's, in order. Drained at shutdown.
   */
  broadcasts: BroadcastLane;
};
