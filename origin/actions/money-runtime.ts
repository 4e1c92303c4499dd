import type { FeeOracle } from "../chain/fees.ts";
import type { Outbox } from "../outbox/index.ts";

/**
 * What the money routes need beyond the infrastructure, built by the composition root (compose.ts)
 * once the start-up check has matched the configuration to the enclave's sealed policy.
 */
export type MoneyRuntime = {
  fees: FeeOracle;
  /** The genesis bridge operator, lowercase: never a recipient. */
  operatorPool: string;
  /** The faucet treasury the enclave signs payouts with; absent without a configured treasury. */
  treasury: { address: string; keyRef: string } | undefined;
  /**
   * The node's one outbox (outbox/outbox.ts), shared with x402: batches, the broadcast lane (each
   * batch's transactions after the last's, in order; drained at shutdown) and the tracker.
   */
  outbox: Outbox;
};
