import { describe, expect, it } from "vitest";
import {
  data,
  ethBlockNumber,
  ethFeeHistoryNextBaseFee,
  ethGetBalance,
  ethGetStorageAt,
  ethGetTransactionCount,
  ethGetTransactionReceipt,
  ethMaxPriorityFeePerGas,
  ethSendRawTransaction,
  nextBaseFee,
  quantity,
  receipt,
  text,
} from "./eth-calls.ts";
import type { RpcCall } from "./json-rpc-call.ts";

const address = "0x71c7656ec7ab88b098defb751b7401b5f6d8976f";
const hash = `0x${"ab".repeat(32)}` as const;

describe("the calls the origin makes", () => {
  const calls: Array<[name: string, call: RpcCall<unknown>, method: string, params: unknown[]]> = [
    ["block number", ethBlockNumber(), "eth_blockNumber", []],
    ["balance", ethGetBalance(address), "eth_getBalance", [address, "latest"]],
    ["mined nonce", ethGetTransactionCount(address), "eth_getTransactionCount", [address, "latest"]],
    ["storage word", ethGetStorageAt(address, hash), "eth_getStorageAt", [address, hash, "latest"]],
    ["next base fee", ethFeeHistoryNextBaseFee(), "eth_feeHistory", ["0x1", "latest", []]],
    ["tip", ethMaxPriorityFeePerGas(), "eth_maxPriorityFeePerGas", []],
    ["receipt", ethGetTransactionReceipt(hash), "eth_getTransactionReceipt", [hash]],
    ["broadcast", ethSendRawTransaction("0x02f8"), "eth_sendRawTransaction", ["0x02f8"]],
  ];

  it.each(calls)(
    "%s: sends its method and params as the origin always has",
    (_name, call, method, params) => {
      expect(call.method).toBe(method);
      expect(call.params).toEqual(params);
    },
  );
});

describe("reading a call's result", () => {
  const quantities: Array<[value: unknown, read: bigint | undefined]> = [
    ["0x0", 0n],
    ["0x1a", 26n],
    ["0xFF", 255n],
    [`0x${"f".repeat(64)}`, 2n ** 256n - 1n],
    ["0x", undefined],
    [`0x${"1".repeat(65)}`, undefined],
    ["1a", undefined],
    ["0xg1", undefined],
    [" 0x1", undefined],
    [26, undefined],
    [null, undefined],
    [undefined, undefined],
  ];
  it.each(quantities)("quantity %j reads as %s", (value, read) => {
    expect(quantity(value)).toBe(read);
  });

  const datas: Array<[value: unknown, read: string | undefined]> = [
    ["0x", "0x"],
    ["0xabcd", "0xabcd"],
    ["0xABC", "0xABC"],
    ["abcd", undefined],
    ["0xzz", undefined],
    [1, undefined],
    [null, undefined],
  ];
  it.each(datas)("data %j reads as %s", (value, read) => {
    expect(data(value)).toBe(read);
  });

  const texts: Array<[value: unknown, read: string | undefined]> = [
    [hash, hash],
    ["not a hash", "not a hash"],
    ["", ""],
    [1, undefined],
    [null, undefined],
    [{}, undefined],
  ];
  it.each(texts)("a broadcast's result %j reads as %j", (value, read) => {
    expect(text(value)).toBe(read);
  });

  const mined = { status: "0x1", gasUsed: "0x5208", effectiveGasPrice: "0x3", blockNumber: "0x10" };
  const receipts: Array<[name: string, value: unknown, read: ReturnType<typeof receipt>]> = [
    ["not mined yet", null, null],
    ["confirmed", mined, { status: "confirmed", feeWei: 21_000n * 3n, blockNumber: 16n }],
    ["reverted", { ...mined, status: "0x0" }, { status: "reverted", feeWei: 63_000n, blockNumber: 16n }],
    [
      "no gas used or price: no fee",
      { status: "0x1", blockNumber: "0x10" },
      { status: "confirmed", feeWei: 0n, blockNumber: 16n },
    ],
    [
      "a null price: no fee",
      { ...mined, effectiveGasPrice: null },
      { status: "confirmed", feeWei: 0n, blockNumber: 16n },
    ],
    ["no status", { ...mined, status: undefined }, undefined],
    ["a status neither 0 nor 1", { ...mined, status: "0x2" }, undefined],
    ["no block number (pending)", { ...mined, blockNumber: null }, undefined],
    ["a gas used that is no quantity", { ...mined, gasUsed: "lots" }, undefined],
    ["a string", "0x1", undefined],
    ["a list", [], undefined],
  ];
  it.each(receipts)("receipt: %s", (_name, value, read) => {
    expect(receipt(value)).toEqual(read);
  });

  it("a receipt read for one transaction that names another is not read (a garbled batch answer)", () => {
    const read = ethGetTransactionReceipt(hash).parse;
    expect(read({ ...mined, transactionHash: `0x${"cd".repeat(32)}` })).toBeUndefined();
    expect(read({ ...mined, transactionHash: hash.toUpperCase().replace("0X", "0x") })).toEqual({
      status: "confirmed",
      feeWei: 63_000n,
      blockNumber: 16n,
    });
    expect(read(null)).toBeNull();
  });

  const histories: Array<[name: string, value: unknown, read: bigint | undefined]> = [
    ["the last base fee is the next block's", { baseFeePerGas: ["0x1", "0x7"] }, 7n],
    ["no base fees", { baseFeePerGas: [] }, undefined],
    ["no base fee list", { gasUsedRatio: [0.5] }, undefined],
    ["a last base fee that is no quantity", { baseFeePerGas: ["0x1", 7] }, undefined],
    ["null", null, undefined],
  ];
  it.each(histories)("fee history: %s", (_name, value, read) => {
    expect(nextBaseFee(value)).toBe(read);
  });
});
