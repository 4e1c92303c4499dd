/**
 * Test fixture: an address every plain transfer to reverts, on the devnet's real EVM. A contract
 * whose whole code is one INVALID opcode (0xfe), so any call to it, with or without value, halts
 * exceptionally: the transaction is mined with status 0, the value stays with the sender and the
 * gas is paid. Tests that need "a transfer the chain mines and reverts" send to it (the
 * NativeTransferAuth precompile would do too, but the gateway refuses it as a recipient before
 * anything is recorded: docs/api.md#transfers-refused-before-anything-is-written-and-short-of-funds).
 *
 * Init code: PUSH1 0xfe PUSH1 0 MSTORE8 (the byte at memory 0), PUSH1 1 PUSH1 0 RETURN (that byte
 * is the runtime code).
 */
import type { Address } from "viem";
import { fund, newAccount, publicClientFor, usdc, walletClientFor } from "../devnet/testing.ts";

const INIT = "0x60fe60005360016000f3";

/** Deploys the contract from a fresh funded account; resolves with its address once mined. */
export async function deployRevertingContract(devnetUrl: string): Promise<Address> {
  const account = newAccount();
  await fund(devnetUrl, account.address, usdc(1n));
  const client = publicClientFor(devnetUrl);
  const deployed = await client.waitForTransactionReceipt({
    hash: await walletClientFor(devnetUrl, account).sendTransaction({ data: INIT, gas: 100_000n }),
  });
  const address = deployed.contractAddress;
  if (!address || deployed.status !== "success") throw new Error("reverting contract deployment failed");
  if ((await client.getCode({ address })) !== "0xfe") throw new Error("reverting contract has other code");
  return address;
}
