/**
 * A block's size (the `size` of eth_getBlockBy*), counted from its parts' lengths by miner.ts,
 * against the block's RLP encoded whole by viem.
 */

import { randomBytes } from "node:crypto";
import { createFeeMarket1559Tx, createLegacyTx } from "@ethereumjs/tx";
import { toRlp } from "viem";
import { describe, expect, it } from "vitest";
import { CHAIN_ID } from "../../shared/constants.ts";
import type { SupportedTx } from "../rpc/format.ts";
import { blockSize, genesisHeader } from "./miner.ts";
import { createDevnetCommon } from "./vm.ts";

const common = createDevnetCommon();
const header = genesisHeader(common, new Uint8Array(32), 1_700_000_000n);

/** A signed transaction of `type` carrying `dataBytes` of call data. */
function transaction(type: 0 | 2, dataBytes: number): SupportedTx {
  const fields = {
    nonce: 7n,
    gasLimit: 1_000_000n,
    to: `0x${"22".repeat(20)}` as const,
    data: randomBytes(dataBytes),
  };
  const key = randomBytes(32);
  return type === 0
    ? createLegacyTx({ ...fields, gasPrice: 3_000_000_000n }, { common }).sign(key)
    : createFeeMarket1559Tx(
        { ...fields, chainId: BigInt(CHAIN_ID), maxFeePerGas: 3n, maxPriorityFeePerGas: 1n },
        { common },
      ).sign(key);
}

/** The block's RLP as the chain defines it: legacy transactions as lists, typed ones as byte strings. */
function encodedLength(txs: readonly SupportedTx[]): number {
  const body = txs.map((tx) => (tx.type === 0 ? tx.raw() : tx.serialize()));
  return toRlp([header.raw(), body, [], []], "bytes").length;
}

const bodyOf = (txs: readonly SupportedTx[]) =>
  txs.map((tx) => ({ type: tx.type, serialized: tx.serialize() }));

describe("a block's size", () => {
  it("is the length of the block's RLP, with no transactions and with one of each type", () => {
    for (const txs of [
      [],
      [transaction(0, 0)],
      [transaction(2, 0)],
      [transaction(0, 3), transaction(2, 68)],
    ]) {
      expect(blockSize(header, bodyOf(txs))).toBe(encodedLength(txs));
    }
  });

  it("counts each length prefix at its width: a body under 56 bytes, and beyond one, two and three length bytes", () => {
    // Call data sizes that put a transaction, and the body, either side of 55, 255 and 65,535 bytes.
    for (const dataBytes of [0, 1, 40, 150, 200, 300, 60_000, 70_000]) {
      for (const type of [0, 2] as const) {
        const txs = [transaction(type, dataBytes)];
        expect(blockSize(header, bodyOf(txs)), `type ${type}, ${dataBytes} bytes of data`).toBe(
          encodedLength(txs),
        );
      }
    }
    const many = Array.from({ length: 300 }, (_, i) => transaction(i % 2 === 0 ? 0 : 2, i));
    expect(blockSize(header, bodyOf(many))).toBe(encodedLength(many));
  });
});
