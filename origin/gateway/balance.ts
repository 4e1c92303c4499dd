import type { Handler } from "hono";
import { NATIVE_DECIMALS, NATIVE_SYMBOL, WEI_PER_UNIT } from "../../shared/constants.ts";
import { ethBlockNumber, ethGetBalance } from "../chain/eth-calls.ts";
import { sendRpcBatch } from "../chain/json-rpc-call.ts";
import type { JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";

/**
 * GET /agent/v1/balance: the assigned wallet only, in 6-decimal units and in wei, with the block
 * it was read at. Block number and balance travel in one batch so they describe the same moment.
 */
export function balanceHandler(upstream: JsonRpcUpstream | undefined): Handler<AppEnv> {
  return async (c) => {
    if (!upstream) throw new AppError("chain_unavailable", "no chain is configured");
    const address = c.get("agent").assignedWallet;
    const [block, balance] = await sendRpcBatch(upstream, [ethBlockNumber(), ethGetBalance(address)]);
    if (!block.ok || !balance.ok) {
      throw new AppError("chain_unavailable", "the chain did not answer; try again later");
    }
    const wei = balance.value;
    // Wei below one unit cannot be spent through the API; the 6-decimal view rounds down.
    return c.json({
      address,
      balance: (wei / WEI_PER_UNIT).toString(),
      decimals: NATIVE_DECIMALS,
      symbol: NATIVE_SYMBOL,
      balance_wei: wei.toString(),
      block_number: block.value.toString(),
    });
  };
}
