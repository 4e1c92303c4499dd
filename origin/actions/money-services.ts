import type { PolicyDecision } from "../../shared/agent-policy.ts";
import type { ActionClaimer } from "../agent-actions/idempotent-action.ts";
import type { Config } from "../config.ts";
import type { Db } from "../db/client.ts";
import type { ExecutorDeps } from "./execute.ts";
import type { MoneyExecutor } from "./operation.ts";

/** What the faucet and transfer routes need beyond the executor's deps. */
export type MoneyServices = ExecutorDeps & {
  db: Db;
  /** One per app: operations that arrive together share its batches. */
  executor: MoneyExecutor;
  /** One per app: claims that arrive together share one insert (repository.ts createActionClaimer). */
  claim: ActionClaimer;
  config: Config;
  /** The genesis bridge operator: never a recipient (docs/api.md#transfers-refused-before-anything-is-written-and-short-of-funds), lowercase. */
  operatorPool: string;
  /** The faucet treasury the enclave signs payouts with; absent when the faucet is off. */
  treasury: { address: string; keyRef: string } | undefined;
  /** Told what an agent's spending policy decided of a transfer (metrics). */
  policyDecided?: (decision: PolicyDecision) => void;
};
