import type { Config } from "../config.ts";
import type { SignerClient } from "../signer/types.ts";
import type { ExecutorDeps } from "./execute.ts";

/** What the faucet and transfer routes need beyond the executor's deps. */
export type MoneyServices = ExecutorDeps & {
  config: Config;
  signer: SignerClient;
  /** The genesis bridge operator: never a recipient (SPEC, DESIGN §5), lowercase. */
  operatorPool: string;
  /** The faucet treasury the enclave signs payouts with; absent when the faucet is off. */
  treasury: { address: string; keyRef: string } | undefined;
};
