/**
 * EIP-1559 fees for the service's own transactions. The tip is the node's suggestion; the cap is
 * twice the next block's base fee plus the tip (it survives the base fee doubling while the
 * transaction waits), never above what the enclave's fee ceiling allows for the gas limit.
 */

import { err, ok, type Result } from "../../shared/result.ts";
import { ethFeeHistoryNextBaseFee, ethMaxPriorityFeePerGas } from "./eth-calls.ts";
import { sendRpcBatch } from "./json-rpc-call.ts";
import type { JsonRpcUpstream } from "./json-rpc-upstream.ts";

export type Fees = { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint; gasLimit: bigint };

/** Why no fees can be quoted now: the chain did not say, or its fees exceed the sealed ceiling. */
export type FeeRefusal = { code: "chain_unavailable" | "above_fee_ceiling"; detail: string };

export type FeeQuote = Result<Fees, FeeRefusal>;

export type FeeOracle = {
  quote(gasLimit: bigint): Promise<FeeQuote>;
  /**
   * Fees for a transaction that replaces one at the same nonce (a filler, outbox/fillers.ts), which
   * is signed once and must outbid what it replaces whatever the base fee does meanwhile: its cap is
   * the most the sealed ceiling allows for `gasLimit` (a cap costs nothing unless the base fee rises
   * to it: a transaction pays the base fee plus its tip), and its tip the quote's, raised to at least
   * 12.5 % above `previous`'s (nodes replace a pending transaction only for a bump of 10 %).
   */
  replacement(
    gasLimit: bigint,
    previous: Pick<Fees, "maxFeePerGas" | "maxPriorityFeePerGas">,
  ): Promise<FeeQuote>;
};

/** A replacement's fees are at least this many eighths of the replaced one's (12.5 % more). */
const REPLACEMENT_BUMP_EIGHTHS = 9n;

/** A plain native transfer. */
export const NATIVE_TRANSFER_GAS = 21_000n;

export type CreateFeeOracleParams = {
  rpc: JsonRpcUpstream;
  /** The sealed policy's ceiling on gas limit × max fee per gas, in wei (docs/enclave.md). */
  feeCeilingWei: bigint;
  /** How long one reading of the chain's fees is reused. */
  maxAgeMs?: number;
  now?: () => number;
};

/** Reads the chain's base fee and tip at most once per `maxAgeMs`, shared by concurrent callers. */
export function createFeeOracle(params: CreateFeeOracleParams): FeeOracle {
  const maxAgeMs = params.maxAgeMs ?? 1_000;
  const now = params.now ?? Date.now;
  let cached: { baseFee: bigint; tip: bigint; at: number } | undefined;
  let reading: Promise<{ baseFee: bigint; tip: bigint } | undefined> | undefined;

  const read = async (): Promise<{ baseFee: bigint; tip: bigint } | undefined> => {
    if (cached && now() - cached.at < maxAgeMs) return cached;
    reading ??= (async () => {
      const [baseFee, tip] = await sendRpcBatch(params.rpc, [
        ethFeeHistoryNextBaseFee(),
        ethMaxPriorityFeePerGas(),
      ]);
      if (!baseFee.ok || !tip.ok) return undefined;
      cached = { baseFee: baseFee.value, tip: tip.value, at: now() };
      return cached;
    })().finally(() => {
      reading = undefined;
    });
    return reading;
  };

  const oracle: FeeOracle = {
    async quote(gasLimit) {
      const market = await read();
      if (!market) return err({ code: "chain_unavailable", detail: "the chain did not report its fees" });
      const wanted = market.baseFee * 2n + market.tip;
      const allowed = params.feeCeilingWei / gasLimit;
      const maxFeePerGas = wanted < allowed ? wanted : allowed;
      // Below base fee plus tip the transaction would not be mined now: better refused than stuck.
      if (maxFeePerGas < market.baseFee + market.tip) {
        return err({
          code: "above_fee_ceiling",
          detail: `the chain's fees (${market.baseFee + market.tip} wei per gas) exceed the sealed fee ceiling`,
        });
      }
      const tip = market.tip < maxFeePerGas ? market.tip : maxFeePerGas;
      return ok({ maxFeePerGas, maxPriorityFeePerGas: tip, gasLimit });
    },
    async replacement(gasLimit, previous) {
      const quoted = await oracle.quote(gasLimit);
      if (!quoted.ok) return quoted;
      const maxFeePerGas = params.feeCeilingWei / gasLimit;
      const bumped = (fee: bigint): bigint => ceilDiv(fee * REPLACEMENT_BUMP_EIGHTHS, 8n);
      if (maxFeePerGas < bumped(previous.maxFeePerGas)) {
        return err({
          code: "above_fee_ceiling",
          detail: "the sealed fee ceiling leaves no room to outbid the transaction being replaced",
        });
      }
      const tip = max(quoted.value.maxPriorityFeePerGas, bumped(previous.maxPriorityFeePerGas));
      return ok({ maxFeePerGas, maxPriorityFeePerGas: min(tip, maxFeePerGas), gasLimit });
    },
  };
  return oracle;
}

const max = (a: bigint, b: bigint): bigint => (a > b ? a : b);
const min = (a: bigint, b: bigint): bigint => (a < b ? a : b);
const ceilDiv = (a: bigint, b: bigint): bigint => (a + b - 1n) / b;
