/**
 * The JSON-RPC methods of the devnet: the spec's read allowlist, what viem's public
 * and wallet clients call, dev_setBalance, and the test controls dev_setNextBlockBaseFeePerGas,
 * dev_setAutomine and dev_mine. Results and errors follow geth,
 * so viem parses them and maps errors (nonce too low, insufficient funds, reverts) to its own error classes.
 */
import { bigIntToBytes, setLengthLeft } from "@ethereumjs/util";
import { CHAIN_ID } from "../../shared/constants.ts";
import { keccak256 } from "../../shared/keccak.ts";
import type { Result } from "../../shared/result.ts";
import type { Chain, StateTag } from "../chain/chain.ts";
import {
  BLOCK_GAS_LIMIT,
  DEVNET_CLIENT_VERSION,
  MAX_FEE_HISTORY_BLOCKS,
  SUGGESTED_PRIORITY_FEE_WEI,
} from "../constants.ts";
import { data, quantity } from "../hex.ts";
import { outcomeError, rejectionMessage } from "./errors.ts";
import { feeHistory } from "./fee-history.ts";
import { RPC_ERROR_CODES, RpcError, type RpcMethod, type RpcMethods } from "./json-rpc.ts";
import {
  type BlockTag,
  invalidArgument,
  parseAddress,
  parseBlockTag,
  parseBoolean,
  parseBytes,
  parseCallRequest,
  parseHash,
  parseLogFilter,
  parseQuantity,
  requireArguments,
} from "./params.ts";
import type { MinedBlock } from "./types.ts";

export function createRpcMethods(chain: Chain): RpcMethods {
  const methods: Record<string, RpcMethod> = {
    web3_clientVersion: () => DEVNET_CLIENT_VERSION,
    web3_sha3: (params) => {
      requireArguments(params, 1);
      return data(keccak256(parseBytes(params[0], 0)));
    },
    net_version: () => String(CHAIN_ID),
    net_listening: () => true,
    net_peerCount: () => "0x0",
    eth_chainId: () => quantity(CHAIN_ID),
    eth_syncing: () => false,
    eth_accounts: () => [],
    eth_blockNumber: () => quantity(chain.height),

    eth_getBalance: async (params) => {
      requireArguments(params, 1, 2);
      const account = await readState(() =>
        chain.account(parseAddress(params[0], 0), stateTag(chain, params[1], 1)),
      );
      return quantity(account.balance);
    },
    eth_getTransactionCount: async (params) => {
      requireArguments(params, 1, 2);
      const account = await readState(() =>
        chain.account(parseAddress(params[0], 0), stateTag(chain, params[1], 1)),
      );
      return quantity(account.nonce);
    },
    eth_getCode: async (params) => {
      requireArguments(params, 1, 2);
      const account = await readState(() =>
        chain.account(parseAddress(params[0], 0), stateTag(chain, params[1], 1)),
      );
      return data(account.code);
    },
    eth_getStorageAt: async (params) => {
      requireArguments(params, 2, 3);
      const address = parseAddress(params[0], 0);
      const slot = parseQuantity(params[1], 1);
      if (slot >= 2n ** 256n) throw invalidArgument(1, "storage slot too large");
      const key = setLengthLeft(bigIntToBytes(slot), 32);
      const value = await readState(() => chain.storageAt(address, key, stateTag(chain, params[2], 2)));
      return data(setLengthLeft(value, 32));
    },

    eth_getBlockByNumber: (params) => {
      requireArguments(params, 1, 2);
      const block = resolveBlock(chain, parseBlockTag(params[0], 0));
      return block === undefined
        ? null
        : blockResponse(block, params[1] === undefined ? false : parseBoolean(params[1], 1));
    },
    eth_getBlockByHash: (params) => {
      requireArguments(params, 1, 2);
      const block = chain.blockByHash(parseHash(params[0], 0));
      return block === undefined
        ? null
        : blockResponse(block, params[1] === undefined ? false : parseBoolean(params[1], 1));
    },
    eth_getTransactionByHash: (params) => {
      requireArguments(params, 1);
      return chain.transaction(parseHash(params[0], 0)) ?? null;
    },
    eth_getTransactionReceipt: (params) => {
      requireArguments(params, 1);
      return chain.receipt(parseHash(params[0], 0)) ?? null;
    },
    eth_getLogs: (params) => {
      requireArguments(params, 1);
      const filter = parseLogFilter(params[0], 0);
      let fromBlock: number;
      let toBlock: number;
      if (filter.blockHash !== undefined) {
        const block = chain.blockByHash(filter.blockHash);
        if (block === undefined) throw new RpcError(RPC_ERROR_CODES.serverError, "unknown block");
        fromBlock = toBlock = Number(BigInt(block.header.number));
      } else {
        const from = rangeBound(chain, filter.fromBlock);
        const to = rangeBound(chain, filter.toBlock);
        if (from > to) throw new RpcError(RPC_ERROR_CODES.invalidParams, "invalid block range params");
        // As geth: a range ending above the head is refused, not answered with the part mined so
        // far, which a poller would take as the whole range and move past.
        if (to > BigInt(chain.height))
          throw new RpcError(RPC_ERROR_CODES.invalidParams, "block range extends beyond current head block");
        [fromBlock, toBlock] = [Number(from), Number(to)];
      }
      return chain.logs({ fromBlock, toBlock, addresses: filter.addresses, topics: filter.topics });
    },

    eth_gasPrice: () => quantity(chain.nextBaseFee() + SUGGESTED_PRIORITY_FEE_WEI),
    eth_maxPriorityFeePerGas: () => quantity(SUGGESTED_PRIORITY_FEE_WEI),
    eth_feeHistory: (params) => {
      requireArguments(params, 2, 3);
      const blockCount = Number(parseQuantity(params[0], 0));
      const newest = resolveBlock(chain, parseBlockTag(params[1], 1));
      if (newest === undefined) throw new RpcError(RPC_ERROR_CODES.serverError, "header not found");
      const newestBlock = Number(BigInt(newest.header.number));
      const percentiles =
        params[2] === undefined || params[2] === null ? undefined : parsePercentiles(params[2]);
      return feeHistory({
        blockCount: Math.min(blockCount, MAX_FEE_HISTORY_BLOCKS),
        newestBlock,
        nextBaseFee:
          newestBlock === chain.height
            ? chain.nextBaseFee()
            : BigInt(chain.blockByNumber(newestBlock + 1)?.header.baseFeePerGas ?? "0x0"),
        rewardPercentiles: percentiles,
        blockByNumber: (n) => chain.blockByNumber(n),
      });
    },

    eth_sendRawTransaction: async (params) => {
      requireArguments(params, 1);
      const sent = await chain.sendRawTransaction(parseBytes(params[0], 0));
      if (!sent.ok) throw new RpcError(RPC_ERROR_CODES.serverError, rejectionMessage(sent.error));
      return sent.value;
    },
    eth_call: async (params) => {
      requireArguments(params, 1, 3);
      const request = parseCallRequest(params[0], 0);
      requireLatest(chain, parseBlockTag(params[1], 1), "eth_call");
      // As geth caps a call's gas (its RPC gas cap), silently.
      const gas = request.gas === undefined || request.gas > BLOCK_GAS_LIMIT ? BLOCK_GAS_LIMIT : request.gas;
      const outcome = await chain.call(request, gas);
      if (outcome.kind === "success") return data(outcome.returnValue);
      throw outcomeError(outcome);
    },
    eth_estimateGas: async (params) => {
      requireArguments(params, 1, 3);
      const request = parseCallRequest(params[0], 0);
      requireLatest(chain, parseBlockTag(params[1], 1), "eth_estimateGas");
      // geth's upper bound: the request's gas if it could pay for a plain transfer, else the block's.
      const cap =
        request.gas === undefined || request.gas < TRANSFER_INTRINSIC_GAS || request.gas > BLOCK_GAS_LIMIT
          ? BLOCK_GAS_LIMIT
          : request.gas;
      const outcome = await chain.estimateGas(request, cap);
      if (outcome.kind === "success") return quantity(outcome.gas);
      if (outcome.kind === "exceeds_allowance") {
        // geth's words, "gas required exceeds allowance (0)" for a sender who cannot pay any gas.
        throw new RpcError(
          RPC_ERROR_CODES.serverError,
          `gas required exceeds allowance (${outcome.allowance})`,
        );
      }
      throw outcomeError(outcome);
    },

    /** Funding for tests and the local stack: sets the balance in wei (in a new, empty block). */
    dev_setBalance: async (params) => {
      requireArguments(params, 2);
      await chain.setBalance(parseAddress(params[0], 0), parseQuantity(params[1], 1));
      return true;
    },
    /** Tests only: the next block's base fee in wei, so a fee can rise between quote and send. */
    dev_setNextBlockBaseFeePerGas: (params) => {
      requireArguments(params, 1);
      chain.setNextBaseFee(parseQuantity(params[0], 0));
      return true;
    },
    /**
     * Tests only: false leaves transactions in the pool (their hashes answered at once) until
     * dev_mine, so a block can come between a read and a transaction's inclusion.
     */
    dev_setAutomine: (params) => {
      requireArguments(params, 1);
      chain.setAutomine(parseBoolean(params[0], 0));
      return true;
    },
    /** Tests only: mines what waits in the pool now; answers once its blocks are stored. */
    dev_mine: async (params) => {
      requireArguments(params, 0);
      await chain.mine();
      return true;
    },
  };
  return new Map(Object.entries(methods));
}

/** geth's params.TxGas: the intrinsic gas of a plain transfer. */
const TRANSFER_INTRINSIC_GAS = 21_000n;

function blockResponse(block: MinedBlock, fullTransactions: boolean): unknown {
  return {
    ...block.header,
    transactions: fullTransactions ? block.transactions : block.transactions.map((tx) => tx.hash),
  };
}

function resolveBlock(chain: Chain, tag: BlockTag): MinedBlock | undefined {
  switch (tag.kind) {
    case "latest":
      return chain.head;
    case "earliest":
      return chain.blockByNumber(0);
    case "number":
      return tag.number > BigInt(chain.height) ? undefined : chain.blockByNumber(Number(tag.number));
    case "hash":
      return chain.blockByHash(tag.hash);
  }
}

function stateTag(chain: Chain, value: unknown, index: number): StateTag {
  const tag = parseBlockTag(value, index);
  if (tag.kind === "latest") return tag.pending ? "pending" : "latest";
  const block = resolveBlock(chain, tag);
  if (block === undefined) throw new RpcError(RPC_ERROR_CODES.serverError, "header not found");
  return Number(BigInt(block.header.number));
}

/** Calls run on the pending block over the live state; older states would need their own VM. */
function requireLatest(chain: Chain, tag: BlockTag, method: string): void {
  if (tag.kind === "latest") return;
  const block = resolveBlock(chain, tag);
  if (block === undefined) throw new RpcError(RPC_ERROR_CODES.serverError, "header not found");
  if (Number(BigInt(block.header.number)) !== chain.height) {
    throw new RpcError(RPC_ERROR_CODES.serverError, `${method} is only supported on the latest block`);
  }
}

/** A log range's bound as a block number, which may lie above the head. */
function rangeBound(chain: Chain, tag: BlockTag): bigint {
  switch (tag.kind) {
    case "latest":
      return BigInt(chain.height);
    case "earliest":
      return 0n;
    case "number":
      return tag.number;
    case "hash": {
      const block = chain.blockByHash(tag.hash);
      if (block === undefined) throw new RpcError(RPC_ERROR_CODES.serverError, "unknown block");
      return BigInt(block.header.number);
    }
  }
}

async function readState<T>(read: () => Promise<Result<T, unknown>>): Promise<T> {
  const result = await read();
  if (!result.ok) throw new RpcError(RPC_ERROR_CODES.serverError, "historical state not available");
  return result.value;
}

function parsePercentiles(value: unknown): number[] {
  if (!Array.isArray(value) || value.length > 100)
    throw invalidArgument(2, "reward percentiles must be an array");
  let previous = 0;
  return value.map((entry: unknown) => {
    if (typeof entry !== "number" || entry < previous || entry > 100) {
      throw invalidArgument(2, "reward percentiles must be ascending numbers from 0 to 100");
    }
    previous = entry;
    return entry;
  });
}
