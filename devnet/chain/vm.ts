/**
 * The EVM of chain 77: @ethereumjs/vm on Cancun rules (London fee market, PUSH0, transient
 * storage), a cached Merkle-trie state behind the tracking decorator, and NativeTransferAuth
 * registered as a custom precompile.
 *
 * Cancun rather than Prague: Prague blocks must call the EIP-7002/7251 system contracts, which a
 * genesis holding only the operator pool does not have.
 */
import { paramsBlock } from "@ethereumjs/block";
import { type Common, createCustomCommon, Hardfork, Mainnet, type ParamsDict } from "@ethereumjs/common";
import { type EVMMockBlockchainInterface, paramsEVM } from "@ethereumjs/evm";
import { MerklePatriciaTrie } from "@ethereumjs/mpt";
import { Caches, MerkleStateManager } from "@ethereumjs/statemanager";
import { paramsTx } from "@ethereumjs/tx";
import { type Address, createAddressFromString, ValueEncoding } from "@ethereumjs/util";
import { createVM, paramsVM, type VM } from "@ethereumjs/vm";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS } from "../../shared/constants.ts";
import { keccak256 } from "../../shared/keccak.ts";
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
  const common = createCustomCommon({ chainId: CHAIN_ID, name: "agent-wallet-devnet" }, Mainnet, {
    hardfork: Hardfork.Cancun,
    // Transactions (and the ecrecover precompile) recover through the common's customCrypto.ecrecover;
    // trie nodes, transactions, headers and the KECCAK256 opcode hash through its keccak256.
    customCrypto: { ecrecover: ecrecover ?? libsecp256k1Ecrecover, keccak256 },
  });
  return withParameterTablesMerged(common);
}

/** The parameter tables ethereumjs's transactions, headers, VM and EVM merge into their Common. */
const PARAMETER_TABLES: readonly ParamsDict[] = [paramsTx, paramsBlock, paramsVM, paramsEVM];

/**
 * Every transaction and block header ethereumjs constructs copies the Common it is given and
 * merges its package's parameter table into the copy: a JSON round trip of each EIP's entries and
 * a rebuilt parameter cache, about a tenth of the devnet's CPU per settlement in bench:devnet's
 * profile. The tables are constants, and a copy shares its original's tables and cache until it
 * merges (Common.copy is a shallow copy); so they are merged once here, and a merge of one of them
 * again, into this Common or any copy of it, which would rebuild the same values, is skipped.
 * Another table (none the devnet uses) still merges as before.
 */
function withParameterTablesMerged(common: Common): Common {
  for (const table of PARAMETER_TABLES) common.updateParams(table);
  const merge = common.updateParams;
  // An own property: Common.copy (Object.assign) carries it to every copy.
  common.updateParams = function (this: Common, params) {
    if (PARAMETER_TABLES.includes(params)) return;
    merge.call(this, params);
  };
  return common;
}

export async function createDevnetVm(params: CreateDevnetVmParams): Promise<DevnetVm> {
  const common = createDevnetCommon(params.ecrecover);
  // With caches, and the block's checkpoint held open until it is sealed (block-builder.ts),
  // writes collect in memory and reach the trie once per block, when its state root is taken.
  // Without them every account or slot a transaction writes re-hashes its trie path at once, and
  // putting many transactions in one block would save little.
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
