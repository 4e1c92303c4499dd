/**
 * The local stack and the tests play the bridge operator: funds come from the genesis operator
 * pool by ordinary signed transfers, so every unit on the devnet is accounted for from genesis
 * (money is conserved; dev_setBalance would mint). Development key only: it guards nothing.
 */
import type { Address, Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { DEV_OPERATOR_POOL_PRIVATE_KEY } from "../devnet/constants.ts";
import { publicClientFor, walletClientFor } from "../devnet/testing.ts";

const operator = privateKeyToAccount(DEV_OPERATOR_POOL_PRIVATE_KEY);
/** One queue per devnet: the pool's nonces are taken in order, one transfer at a time. */
const queues = new Map<string, Promise<unknown>>();

/** Sends `wei` from the operator pool to `to` and waits for its receipt; resolves with the hash. */
export function payFromOperatorPool(devnetUrl: string, to: Address, wei: bigint): Promise<Hex> {
  const run = async (): Promise<Hex> => {
    const wallet = walletClientFor(devnetUrl, operator);
    const hash = await wallet.sendTransaction({ to, value: wei });
    const receipt = await publicClientFor(devnetUrl).waitForTransactionReceipt({ hash, timeout: 30_000 });
    if (receipt.status !== "success") throw new Error(`funding ${to} reverted`);
    return hash;
  };
  const previous = queues.get(devnetUrl) ?? Promise.resolve();
  const next = previous.then(run, run);
  queues.set(
    devnetUrl,
    next.catch(() => undefined),
  );
  return next;
}
