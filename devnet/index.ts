/**
 * The chain-77 devnet: a real EVM with the NativeTransferAuth precompile, mining
 * transactions as they arrive (those that arrive together share a block), served as JSON-RPC on
 * loopback. Tests start it in-process on a free port;
 * `npm run devnet` runs it as a process (main.ts).
 */
import { availableParallelism } from "node:os";
import { createAddressFromString } from "@ethereumjs/util";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";
import { libsecp256k1 } from "../shared/libsecp256k1.ts";
import { Chain } from "./chain/chain.ts";
import { SignatureRecovery } from "./chain/signature-recovery.ts";
import {
  DEFAULT_DEVNET_HOST,
  DEFAULT_DEVNET_PORT,
  DEFAULT_OPERATOR_POOL_BALANCE_WEI,
  DEV_OPERATOR_POOL_ADDRESS,
} from "./constants.ts";
import { quantity } from "./hex.ts";
import type { DevnetLogger } from "./logger.ts";
import { silentLogger } from "./logger.ts";
import { createRpcMethods } from "./rpc/methods.ts";
import { type RpcServer, startRpcServer } from "./rpc/server.ts";
import { readStateFile, writeStateFile } from "./state/state-file.ts";

export { NATIVE_TRANSFER_AUTH_ABI } from "./chain/precompile/abi.ts";
export { TRANSFER_GAS, VIEW_GAS } from "./chain/precompile/native-transfer-auth.ts";
export { REVERT_REASONS } from "./chain/precompile/reasons.ts";
export {
  DEFAULT_DEVNET_PORT,
  DEFAULT_OPERATOR_POOL_BALANCE_WEI,
  DEV_OPERATOR_POOL_ADDRESS,
  DEV_OPERATOR_POOL_PRIVATE_KEY,
} from "./constants.ts";
export type { DevnetLogger } from "./logger.ts";
export { createStderrLogger } from "./logger.ts";

export type StartDevnetOptions = {
  /** TCP port; 0 picks a free one. Default 8545. */
  port?: number;
  /** Default 127.0.0.1: the devnet has no authentication and a funding method. */
  host?: string;
  /** The genesis bridge operator: funded at genesis, barred as `from` by the precompile. */
  operatorPool?: `0x${string}`;
  /** Genesis balance of the operator pool, in wei. */
  operatorPoolBalanceWei?: bigint;
  /** Loaded on start when present, written on close. In memory only when absent. */
  stateFile?: string;
  logger?: DevnetLogger;
  /**
   * Most transactions in one block; the block gas limit caps it too. Default: no count limit.
   * 1 gives back one block per transaction (the benchmark's baseline for group commit).
   */
  maxTxsPerBlock?: number;
  /**
   * Worker threads that recover transaction and authorization signatures ahead of the block
   * (chain/signature-recovery.ts). Default: none where libsecp256k1 loads (a recovery on the spot is
   * cheaper than the hand-off), else one less than the CPUs, at most 2; 0 recovers everything on
   * the main thread.
   */
  signatureWorkers?: number;
  /**
   * The most calls one JSON-RPC batch may carry; a longer batch is refused whole. Default 1000,
   * geth's; a lower one plays a hosted node that caps batches.
   */
  maxBatchLength?: number;
};

export type Devnet = {
  url: string;
  port: number;
  /** Stops serving, lets running requests finish, and saves the state file if there is one. */
  close(): Promise<void>;
};

export async function startDevnet(options: StartDevnetOptions = {}): Promise<Devnet> {
  const logger = options.logger ?? silentLogger;
  const { maxTxsPerBlock } = options;
  if (maxTxsPerBlock !== undefined && !(Number.isInteger(maxTxsPerBlock) && maxTxsPerBlock >= 1)) {
    throw new Error("maxTxsPerBlock must be a positive integer");
  }
  const { maxBatchLength } = options;
  if (maxBatchLength !== undefined && !(Number.isInteger(maxBatchLength) && maxBatchLength >= 1)) {
    throw new Error("maxBatchLength must be a positive integer");
  }
  const signatureWorkers =
    options.signatureWorkers ?? (libsecp256k1 ? 0 : Math.min(2, availableParallelism() - 1));
  if (!(Number.isInteger(signatureWorkers) && signatureWorkers >= 0)) {
    throw new Error("signatureWorkers must be a non-negative integer");
  }
  const snapshot = options.stateFile === undefined ? undefined : await readStateFile(options.stateFile);
  if (snapshot !== undefined && snapshot.chainId !== CHAIN_ID) {
    throw new Error(`state file ${options.stateFile} is for chain ${snapshot.chainId}, not ${CHAIN_ID}`);
  }
  if (options.operatorPool !== undefined && !/^0x[0-9a-fA-F]{40}$/.test(options.operatorPool)) {
    throw new Error("operatorPool must be a 20-byte hex address");
  }
  const requestedPool = options.operatorPool?.toLowerCase();
  if (
    snapshot !== undefined &&
    requestedPool !== undefined &&
    requestedPool !== snapshot.operatorPool.toLowerCase()
  ) {
    throw new Error(
      `state file ${options.stateFile} was created for operator pool ${snapshot.operatorPool}, not ${options.operatorPool}`,
    );
  }
  const operatorPool = createAddressFromString(
    requestedPool ?? snapshot?.operatorPool.toLowerCase() ?? DEV_OPERATOR_POOL_ADDRESS.toLowerCase(),
  );
  const recovery = new SignatureRecovery(signatureWorkers);
  let chain: Chain;
  try {
    chain = await Chain.create({
      operatorPool,
      operatorPoolBalanceWei: options.operatorPoolBalanceWei ?? DEFAULT_OPERATOR_POOL_BALANCE_WEI,
      snapshot,
      logger,
      maxTxsPerBlock,
      recovery,
      // Beside the state file, in the devnet's data folder; a temporary file without one.
      history: {
        historyFile: options.stateFile === undefined ? undefined : `${options.stateFile}.blocks.jsonl`,
      },
    });
  } catch (error) {
    await recovery.close();
    throw error;
  }
  let server: RpcServer;
  try {
    server = await startRpcServer({
      host: options.host ?? DEFAULT_DEVNET_HOST,
      port: options.port ?? DEFAULT_DEVNET_PORT,
      methods: createRpcMethods(chain),
      logger,
      health: () => ({ status: "ok", chainId: quantity(CHAIN_ID), blockNumber: quantity(chain.height) }),
      maxBatchLength: options.maxBatchLength,
    });
  } catch (error) {
    chain.close();
    await recovery.close();
    throw error;
  }
  logger.info(
    {
      url: server.url,
      chainId: CHAIN_ID,
      operatorPool: operatorPool.toString(),
      precompile: NATIVE_TRANSFER_AUTH_ADDRESS,
      blockNumber: chain.height,
      restored: snapshot !== undefined,
    },
    "devnet started",
  );

  let closing: Promise<void> | undefined;
  const close = async (): Promise<void> => {
    await server.close();
    if (options.stateFile !== undefined) {
      // Taken under the chain lock, after any block still being mined.
      await writeStateFile(options.stateFile, await chain.snapshot());
      logger.info({ stateFile: options.stateFile, blockNumber: chain.height }, "state saved");
    }
    chain.close();
    await recovery.close();
  };
  return {
    url: server.url,
    port: server.port,
    close: () => {
      closing ??= close();
      return closing;
    },
  };
}
