/**
 * Test fixture: big receipts on the devnet's real EVM. A tiny contract, written here as raw
 * bytecode, that emits `count` LOG1 entries of `size` bytes (of memory, zeros) per call, so a
 * test can ask the /rpc proxy for answers as large as the chain can make them.
 *
 * Runtime (calldata: count, size as two 32-byte words):
 *   00 PUSH1 0 CALLDATALOAD PUSH1 32 CALLDATALOAD     stack: count size
 *   06 JUMPDEST DUP2 ISZERO PUSH1 0x1b JUMPI           stop when count is 0
 *   0c PUSH1 0xaa DUP2 PUSH1 0 LOG1                    LOG1(offset 0, size, topic 0xaa)
 *   12 SWAP1 PUSH1 1 SWAP1 SUB SWAP1 PUSH1 6 JUMP      count - 1, loop
 *   1b JUMPDEST STOP
 * Init code copies the 29 runtime bytes (after its own 11) and returns them.
 */
import { encodeAbiParameters, type Hex } from "viem";
import { fund, newAccount, publicClientFor, usdc, walletClientFor } from "../devnet/testing.ts";

const RUNTIME = "6000356020355b8115601b5760aa816000a19060019003906006565b00";
const INIT = "601d80600b6000396000f3";

export type LogEmitter = {
  /** Mines one transaction emitting `count` logs of `size` bytes; resolves with its hash. */
  emit(count: number, size: number): Promise<Hex>;
};

export async function deployLogEmitter(devnetUrl: string): Promise<LogEmitter> {
  const account = newAccount();
  await fund(devnetUrl, account.address, usdc(1_000_000n));
  const wallet = walletClientFor(devnetUrl, account);
  const client = publicClientFor(devnetUrl);
  const deployed = await client.waitForTransactionReceipt({
    hash: await wallet.sendTransaction({ data: `0x${INIT}${RUNTIME}`, gas: 200_000n }),
  });
  const address = deployed.contractAddress;
  if (!address || deployed.status !== "success") throw new Error("log emitter deployment failed");
  return {
    async emit(count, size) {
      const hash = await wallet.sendTransaction({
        to: address,
        data: encodeAbiParameters([{ type: "uint256" }, { type: "uint256" }], [BigInt(count), BigInt(size)]),
        gas: 29_000_000n,
      });
      const receipt = await client.waitForTransactionReceipt({ hash });
      if (receipt.status !== "success") throw new Error("log emitter call reverted");
      return hash;
    },
  };
}
