/**
 * What a compromised origin does with an agent's key: asks the enclave over its socket to sign a
 * transfer of that agent's, with whatever action id it likes, past every check of the origin's.
 * The tests of the enclave's own checks (a held transfer, an approval) sign with this.
 */
import type { Address } from "viem";
import type { SignerClient, SignerResult, SignTransactionResult } from "../origin/signer/types.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import type { StackAgent } from "./agent-factory.ts";

export function signTransferOverSocket(
  signer: SignerClient,
  agent: StackAgent,
  transfer: { to: Address; valueUnits: bigint; actionId: string; nonce?: bigint },
): Promise<SignerResult<SignTransactionResult>> {
  return signer.signTransfer({
    keyRef: agent.keyRef,
    from: agent.wallet,
    chainId: CHAIN_ID,
    to: transfer.to,
    valueUnits: transfer.valueUnits,
    nonce: transfer.nonce ?? 0n,
    maxFeePerGas: 2_000_000_000n,
    maxPriorityFeePerGas: 1_000_000_000n,
    gasLimit: 21_000n,
    actionId: transfer.actionId,
  });
}
