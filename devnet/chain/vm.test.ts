/**
 * The devnet's Common (vm.ts createDevnetCommon): ethereumjs's parameter tables merged once, with
 * the values its own merging gives, and no merge repeated per transaction or block header.
 */
import { paramsBlock } from "@ethereumjs/block";
import { Common, createCustomCommon, Hardfork, Mainnet } from "@ethereumjs/common";
import { paramsEVM } from "@ethereumjs/evm";
import { createFeeMarket1559Tx, paramsTx } from "@ethereumjs/tx";
import { paramsVM } from "@ethereumjs/vm";
import { afterEach, describe, expect, it, vi } from "vitest";
import { CHAIN_ID } from "../../shared/constants.ts";
import { genesisHeader } from "./miner.ts";
import { createDevnetCommon } from "./vm.ts";

/** What ethereumjs reads a parameter from: the cache its merges build. */
const cacheOf = (common: Common): unknown => (common as unknown as { _paramsCache: unknown })._paramsCache;
const buildCache = (): ReturnType<typeof vi.spyOn> =>
  vi.spyOn(Common.prototype as unknown as { _buildParamsCache(): void }, "_buildParamsCache");

afterEach(() => {
  vi.restoreAllMocks();
});

describe("the devnet's Common", () => {
  it("holds the parameters ethereumjs's own merges give, in the order its VM, EVM, transactions and headers merge them", () => {
    const plain = createCustomCommon({ chainId: CHAIN_ID, name: "agent-wallet-devnet" }, Mainnet, {
      hardfork: Hardfork.Cancun,
    });
    for (const table of [paramsVM, paramsEVM, paramsTx, paramsBlock]) plain.updateParams(table);
    const ours = createDevnetCommon();
    expect(cacheOf(ours)).toEqual(cacheOf(plain));
    expect(ours.param("txGas")).toBe(21_000n);
    expect(ours.param("baseFeeMaxChangeDenominator")).toBe(8n);
  });

  it("rebuilds no parameter cache for a transaction or a block header built on it, or on a copy", () => {
    const common = createDevnetCommon();
    const rebuilt = buildCache();
    const tx = createFeeMarket1559Tx(
      { chainId: BigInt(CHAIN_ID), gasLimit: 21_000n, to: `0x${"22".repeat(20)}` },
      { common },
    );
    genesisHeader(common.copy(), new Uint8Array(32), 1n);
    expect(rebuilt).not.toHaveBeenCalled();
    // …and both still read the parameters merged once.
    expect(tx.getIntrinsicGas()).toBe(21_000n);
    expect(tx.common.param("txGas")).toBe(21_000n);
  });

  it("still merges a table of parameters it was not built with", () => {
    const common = createDevnetCommon().copy();
    const rebuilt = buildCache();
    common.updateParams({ 1559: { initialBaseFee: 7 } });
    expect(rebuilt).toHaveBeenCalledOnce();
    expect(common.param("initialBaseFee")).toBe(7n);
  });
});
