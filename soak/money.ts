/**
 * Money conservation, to the wei: the devnet cannot mint, and the local stack funds
 * every wallet from the genesis operator pool by ordinary transfers, so the balances of every
 * address the run involved plus the fees paid in every receipt since genesis must equal the
 * genesis allocation. The chain is read from block 0, so the transactions the stack sent at
 * start-up (treasury, local agent, soak agents) are in the sum too.
 *
 * Tips are credited to the coinbase, the zero address (devnet/constants.ts), and the base fee is
 * burnt: the zero address is left out of the balances, since its tips are already in the fees.
 */
import { type Address, getAddress, type Hex, hexToBigInt, toHex } from "viem";
import { TRANSFER_TOPIC } from "../devnet/chain/precompile/abi.ts";
import { COINBASE_ADDRESS, DEFAULT_OPERATOR_POOL_BALANCE_WEI } from "../devnet/constants.ts";
import { NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";

type RpcTransaction = { hash: Hex; from: Address; to: Address | null };
type RpcBlock = { number: Hex; baseFeePerGas?: Hex; transactions: RpcTransaction[] };
type RpcLog = { address: Address; topics: Hex[] };
type RpcReceipt = { gasUsed: Hex; effectiveGasPrice: Hex; blockNumber: Hex; logs: RpcLog[] };

export type MoneyCategory = { name: string; addresses: number; wei: bigint };

export type MoneyCheck = {
  genesisWei: bigint;
  balancesWei: bigint;
  feesWei: bigint;
  /** balances + fees − genesis: zero when money is conserved. */
  differenceWei: bigint;
  categories: MoneyCategory[];
  blocks: number;
  transactions: number;
  /** The zero address's balance against the tips of every receipt (a cross-check of the fee sum). */
  coinbaseWei: bigint;
  tipsWei: bigint;
};

const BATCH = 50;

async function rpcBatch<T>(url: string, calls: { method: string; params: unknown[] }[]): Promise<T[]> {
  const out: T[] = [];
  for (let start = 0; start < calls.length; start += BATCH) {
    const slice = calls.slice(start, start + BATCH).map((call, i) => ({ jsonrpc: "2.0", id: i, ...call }));
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(slice),
    });
    const answers = (await response.json()) as { id: number; result?: T; error?: { message: string } }[];
    for (const answer of [...answers].sort((a, b) => a.id - b.id)) {
      if (answer.error || answer.result === undefined) {
        throw new Error(`devnet: ${answer.error?.message ?? "no result"}`);
      }
      out.push(answer.result);
    }
  }
  return out;
}

/** The address in a 32-byte event topic. */
const topicAddress = (topic: Hex): Address => getAddress(`0x${topic.slice(-40)}`);

/**
 * Sums, at the latest block, the balances of `known` (named categories) and of every other address
 * any transaction or NativeTransferAuth transfer touched, plus the fees of every receipt.
 */
export async function checkMoney(
  devnetUrl: string,
  known: Record<string, readonly Address[]>,
): Promise<MoneyCheck> {
  const [latestHex] = await rpcBatch<Hex>(devnetUrl, [{ method: "eth_blockNumber", params: [] }]);
  const latest = Number(hexToBigInt(latestHex!));
  const blocks = await rpcBatch<RpcBlock>(
    devnetUrl,
    Array.from({ length: latest + 1 }, (_, n) => ({
      method: "eth_getBlockByNumber",
      params: [toHex(n), true],
    })),
  );
  const transactions = blocks.flatMap((block) => block.transactions);
  const receipts = await rpcBatch<RpcReceipt>(
    devnetUrl,
    transactions.map((tx) => ({ method: "eth_getTransactionReceipt", params: [tx.hash] })),
  );
  const baseFee = new Map(blocks.map((block) => [block.number, hexToBigInt(block.baseFeePerGas ?? "0x0")]));

  let feesWei = 0n;
  let tipsWei = 0n;
  const seen = new Set<Address>();
  transactions.forEach((tx, i) => {
    const receipt = receipts[i]!;
    const gasUsed = hexToBigInt(receipt.gasUsed);
    const price = hexToBigInt(receipt.effectiveGasPrice);
    feesWei += gasUsed * price;
    tipsWei += gasUsed * (price - (baseFee.get(receipt.blockNumber) ?? 0n));
    seen.add(getAddress(tx.from));
    if (tx.to) seen.add(getAddress(tx.to));
    for (const log of receipt.logs) {
      if (
        getAddress(log.address) === getAddress(NATIVE_TRANSFER_AUTH_ADDRESS) &&
        log.topics[0] === TRANSFER_TOPIC
      ) {
        seen.add(topicAddress(log.topics[1]!));
        seen.add(topicAddress(log.topics[2]!));
      }
    }
  });

  // Each address counted once, under the first category that names it.
  const counted = new Set<Address>([getAddress(COINBASE_ADDRESS)]);
  const groups: { name: string; addresses: Address[] }[] = [];
  for (const [name, addresses] of Object.entries(known)) {
    const fresh = [...new Set(addresses.map((address) => getAddress(address)))].filter(
      (a) => !counted.has(a),
    );
    for (const address of fresh) counted.add(address);
    groups.push({ name, addresses: fresh });
  }
  groups.push({ name: "other addresses seen on chain", addresses: [...seen].filter((a) => !counted.has(a)) });

  const all = [...groups.flatMap((group) => group.addresses), getAddress(COINBASE_ADDRESS)];
  const balances = await rpcBatch<Hex>(
    devnetUrl,
    all.map((address) => ({ method: "eth_getBalance", params: [address, latestHex] })),
  );
  const balanceOf = new Map(all.map((address, i) => [address, hexToBigInt(balances[i]!)]));
  const categories = groups.map((group) => ({
    name: group.name,
    addresses: group.addresses.length,
    wei: group.addresses.reduce((sum, address) => sum + balanceOf.get(address)!, 0n),
  }));
  const balancesWei = categories.reduce((sum, category) => sum + category.wei, 0n);
  const genesisWei = DEFAULT_OPERATOR_POOL_BALANCE_WEI;
  return {
    genesisWei,
    balancesWei,
    feesWei,
    differenceWei: balancesWei + feesWei - genesisWei,
    categories,
    blocks: latest + 1,
    transactions: transactions.length,
    coinbaseWei: balanceOf.get(getAddress(COINBASE_ADDRESS))!,
    tipsWei,
  };
}
