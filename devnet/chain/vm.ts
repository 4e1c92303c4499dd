/**
 * The EVM of chain 77: @ethereumjs/vm on Cancun rules (London fee market, PUSH0, transient
 * storage), a cached Merkle-trie state behind the tracking decorator, and NativeTransferAuth
 * registered as a custom precompile.
 *
 * Cancun rather than Prague: Prague blocks must call the EIP-7002/7251 system contracts, which a
 * genesis holding only the operator pool does not have.
 */
import { type Common, createCustomCommon, Hardfork, Mainnet } from "@ethereumjs/common";
import type { EVMMockBlockchainInterface } from "@ethereumjs/evm";
import { MerklePatriciaTrie } from "@ethereumjs/mpt";
import { Caches, MerkleStateManager } from "@ethereumjs/statemanager";
import { type Address, createAddressFromString, ValueEncoding } from "@ethereumjs/util";
import { createVM, type VM } from "@ethereumjs/vm";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS } from "../../shared/constants.ts";
import { StatePruner } from "../state/pruning.ts";
import { TrackingStateManager } from "../state/tracking-state-manager.ts";
import { createNativeTransferAuth } from "./precompile/native-transfer-auth.ts";
import { type Ecrecover, ecrecover as libsecp256k1Ecrecover } from "./signature-recovery.ts";

export type ExecutionContext = {
  /** Timestamp of the block being executed or simulated; set under the chain lock before each run. */
  timestamp: bigint;
};

export type DevnetVm = {
  common: Common;
  vm: VM;
  state: TrackingStateManager;
  execution: ExecutionContext;
  /** Tell it every new block's state root: it keeps the latest states' trie nodes, not all. */
  pruner: StatePruner;
};

export type CreateDevnetVmParams = {
  operatorPool: Address;
  /** Hash of a mined block, for the BLOCKHASH opcode. */
  blockHash(number: number): Uint8Array | undefined;
  /**
   * Public-key recovery for transaction senders and the precompile (the chain passes one that
   * serves keys recovered ahead on worker threads); default signature-recovery.ts's ecrecover.
   */
  ecrecover?: Ecrecover;
  /** Told if pruning old states fails (it then stops; nothing is lost). */
  onPruningError(error: Error): void;
};

export function createDevnetCommon(ecrecover?: Ecrecover): Common {
  return createCustomCommon({ chainId: CHAIN_ID, name: "agent-wallet-devnet" }, Mainnet, {
    hardfork: Hardfork.Cancun,
    // Transactions (and the ecrecover precompile) recover through the common's customCrypto.ecrecover.
    customCrypto: { ecrecover: ecrecover ?? libsecp256k1Ecrecover },
  });
}

export async function createDevnetVm(params: CreateDevnetVmParams): Promise<DevnetVm> {
  const common = createDevnetCommon(params.ecrecover);
  // With caches, writes collect in memory and reach the trie once per block, when the block's
  // state root is taken. Without them every account or slot a transaction writes re-hashes its
  // trie path at once, and putting many transactions in one block would save little.
  const stateCommon = createDevnetCommon();
  const pruner = new StatePruner({ onError: params.onPruningError });
  // What MerkleStateManager builds by default (a key-hashing trie), on the pruner's node store.
  const trie = new MerklePatriciaTrie({
    useKeyHashing: true,
    common: stateCommon,
    db: pruner.nodes,
    valueEncoding: ValueEncoding.Bytes,
  });
  const merkle = new MerkleStateManager({ common: stateCommon, trie, caches: new Caches() });
  const state = new TrackingStateManager(merkle);
  const execution: ExecutionContext = { timestamp: 0n };
  const precompile = createNativeTransferAuth({
    address: createAddressFromString(NATIVE_TRANSFER_AUTH_ADDRESS),
    operatorPool: params.operatorPool,
    chainId: BigInt(CHAIN_ID),
    blockTimestamp: () => execution.timestamp,
    ecrecover: params.ecrecover,
  });
  const blockchain: EVMMockBlockchainInterface = {
    async getBlock(number: number) {
      const hash = params.blockHash(number);
      if (hash === undefined) throw new Error(`block ${number} is not known`);
      return { hash: () => hash };
    },
    async putBlock() {},
    shallowCopy() {
      return blockchain;
    },
  };
  const vm = await createVM({
    common,
    stateManager: state,
    blockchain,
    evmOpts: { customPrecompiles: [{ address: precompile.address, function: precompile.run }] },
  });
  const events = vm.evm.events;
  if (events === undefined)
    throw new Error("the EVM exposes no events; NativeTransferAuth needs beforeMessage");
  events.on("beforeMessage", (message) => precompile.observeMessage(message));
  return { common, vm, state, execution, pruner };
}
