/**
 * What a compromised origin could do with an agent's key: sign a transfer of its own at the
 * wallet's first nonce over the enclave's socket and send it straight to the chain, mined before
 * the service's own transfer at that nonce gets there. Tests of a transaction whose nonce another
 * took (origin/outbox/foreign-nonce.int.test.ts, receipt-read-fails.int.test.ts) run it just before
 * the service's broadcast.
 */
import type { Hex, PublicClient } from "viem";
import { newAccount } from "../devnet/testing.ts";
import type { SignerClient } from "../origin/signer/types.ts";
import { CHAIN_ID } from "../shared/constants.ts";

/** Signs and mines 1,000 units from `agent` at nonce 0 to `to` (a fresh address by default). */
export async function mineForeignTransferAtNonceZero(params: {
  signer: Pick<SignerClient, "signTransfer">;
  chain: PublicClient;
  agent: { keyRef: string; wallet: Hex };
  to?: Hex;
}): Promise<void> {
  const { signer, chain, agent } = params;
  const block = await chain.getBlock();
  const tip = 1_000_000_000n;
  const signed = await signer.signTransfer({
    keyRef: agent.keyRef,
    from: agent.wallet,
    to: params.to ?? newAccount().address,
    valueUnits: 1_000n,
    chainId: CHAIN_ID,
    nonce: 0n,
    maxFeePerGas: (block.baseFeePerGas ?? 0n) * 2n + tip,
    maxPriorityFeePerGas: tip,
    gasLimit: 21_000n,
  });
  if (!signed.ok) throw new Error(`sign_transfer: ${signed.error.code}`);
  const hash = await chain.sendRawTransaction({ serializedTransaction: signed.value.rawTransaction as Hex });
  await chain.waitForTransactionReceipt({ hash: hash as Hex });
}
