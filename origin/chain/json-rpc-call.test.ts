import { describe, expect, it } from "vitest";
import { err, ok } from "../../shared/result.ts";
import {
  ethBlockNumber,
  ethGetBalance,
  ethGetStorageAt,
  ethGetTransactionCount,
  quantity,
} from "./eth-calls.ts";
import { type RpcCallResult, readRpcAnswer, sendRpcBatch, sendRpcCall } from "./json-rpc-call.ts";
import type { UpstreamResult } from "./json-rpc-upstream.ts";

/** An upstream that records what it is sent and answers `answer`. */
function upstream(answer: UpstreamResult): {
  send(payload: unknown): Promise<UpstreamResult>;
  sent: unknown[];
} {
  const sent: unknown[] = [];
  return {
    sent,
    async send(payload) {
      sent.push(JSON.stringify(payload));
      return answer;
    },
  };
}

const a = "0x00000000000000000000000000000000000000aa";
const b = "0x00000000000000000000000000000000000000bb";

describe("the wire", () => {
  it("sends a batch's calls flattened in the order listed, ids their positions, in the bytes hand-built objects had", async () => {
    const rpc = upstream(ok([]));
    await sendRpcBatch(rpc, [
      ethGetTransactionCount(a),
      ethBlockNumber(),
      [a, b].map((payer) => [ethGetStorageAt(b, "0x01"), ethGetBalance(payer)] as const),
    ]);
    expect(rpc.sent).toEqual([
      JSON.stringify([
        { jsonrpc: "2.0", id: 0, method: "eth_getTransactionCount", params: [a, "latest"] },
        { jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] },
        { jsonrpc: "2.0", id: 2, method: "eth_getStorageAt", params: [b, "0x01", "latest"] },
        { jsonrpc: "2.0", id: 3, method: "eth_getBalance", params: [a, "latest"] },
        { jsonrpc: "2.0", id: 4, method: "eth_getStorageAt", params: [b, "0x01", "latest"] },
        { jsonrpc: "2.0", id: 5, method: "eth_getBalance", params: [b, "latest"] },
      ]),
    ]);
  });

  it("sends one call on its own as an object with the id 1, and an empty batch not at all", async () => {
    const rpc = upstream(ok({ jsonrpc: "2.0", id: 1, result: "0x5" }));
    expect(await sendRpcCall(rpc, ethBlockNumber())).toEqual(ok(5n));
    expect(await sendRpcBatch(rpc, [])).toEqual([]);
    expect(await sendRpcBatch(rpc, [[], []])).toEqual([[], []]);
    expect(rpc.sent).toEqual([
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] }),
    ]);
  });
});

describe("reading one answer", () => {
  const answers: Array<[name: string, answer: unknown, read: RpcCallResult<bigint>]> = [
    ["a result", { jsonrpc: "2.0", id: 0, result: "0x2a" }, ok(42n)],
    [
      "an error object",
      { jsonrpc: "2.0", id: 0, error: { code: -32000, message: "header not found" } },
      err({ code: "rpc_error", error: { code: -32000, message: "header not found" } }),
    ],
    [
      "an error object without a code",
      { error: { message: "busy" } },
      err({ code: "rpc_error", error: { code: undefined, message: "busy" } }),
    ],
    [
      "an error object whose code is no number",
      { error: { code: "x", message: "busy" } },
      err({ code: "rpc_error", error: { code: undefined, message: "busy" } }),
    ],
    ["an error without a message", { error: { code: -32000 } }, err({ code: "unparseable" })],
    ["an error that is no object", { error: "busy" }, err({ code: "unparseable" })],
    ["a result the parser does not take", { result: "0xzz" }, err({ code: "unparseable" })],
    ["a null result", { result: null }, err({ code: "unparseable" })],
    ["neither result nor error", { jsonrpc: "2.0", id: 0 }, err({ code: "unparseable" })],
    ["a result and an error: the result", { result: "0x1", error: { code: 1, message: "m" } }, ok(1n)],
    [
      "a result it cannot read and an error: the error",
      { result: null, error: { code: 1, message: "m" } },
      err({ code: "rpc_error", error: { code: 1, message: "m" } }),
    ],
    ["null", null, err({ code: "unparseable" })],
    ["a string", "0x1", err({ code: "unparseable" })],
    ["a list", [{ result: "0x1" }], err({ code: "unparseable" })],
  ];
  it.each(answers)("%s", (_name, answer, read) => {
    expect(readRpcAnswer(quantity, answer)).toEqual(read);
  });

  it("reads one call's answer the same way, and a failed round trip as the upstream's failure", async () => {
    expect(await sendRpcCall(upstream(ok({ error: { code: 3, message: "m" } })), ethBlockNumber())).toEqual(
      err({ code: "rpc_error", error: { code: 3, message: "m" } }),
    );
    expect(await sendRpcCall(upstream(ok(null)), ethBlockNumber())).toEqual(err({ code: "unparseable" }));
    expect(await sendRpcCall(upstream(err("timeout")), ethBlockNumber())).toEqual(
      err({ code: "upstream", failure: "timeout" }),
    );
  });
});

describe("reading a batch's answer", () => {
  const three = [ethBlockNumber(), ethGetBalance(a), ethGetBalance(b)] as const;
  const batches: Array<[name: string, answer: UpstreamResult, read: RpcCallResult<bigint>[]]> = [
    [
      "items matched by id, whatever their order",
      ok([
        { id: 2, result: "0x3" },
        { id: 0, result: "0x1" },
        { id: 1, result: "0x2" },
      ]),
      [ok(1n), ok(2n), ok(3n)],
    ],
    [
      "an item left out is missing",
      ok([
        { id: 0, result: "0x1" },
        { id: 2, result: "0x3" },
      ]),
      [ok(1n), err({ code: "missing" }), ok(3n)],
    ],
    [
      "items without a usable id are missing: no id, a string id, an id out of range, not an object",
      ok([{ result: "0x1" }, { id: "1", result: "0x2" }, { id: 3, result: "0x4" }, { id: 2.5 }, null, "x"]),
      [err({ code: "missing" }), err({ code: "missing" }), err({ code: "missing" })],
    ],
    [
      "a repeated id (garbled ids): no item is trusted, bad_body for every call",
      ok([
        { id: 0, result: "0x1" },
        { id: 1, result: "0x2" },
        { id: 0, result: "0x9" },
        { id: 2, result: "0x3" },
      ]),
      Array(3).fill(err({ code: "upstream", failure: "bad_body" })),
    ],
    [
      "an answer that is no batch: bad_body for every call",
      ok({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "batch too large" } }),
      Array(3).fill(err({ code: "upstream", failure: "bad_body" })),
    ],
    [
      "a failed round trip: its failure for every call",
      err("unreachable"),
      Array(3).fill(err({ code: "upstream", failure: "unreachable" })),
    ],
  ];
  it.each(batches)("%s", async (_name, answer, read) => {
    expect(await sendRpcBatch(upstream(answer), three)).toEqual(read);
  });

  it("answers in the shape of the calls", async () => {
    const answer = ok([
      { id: 0, result: "0x1" },
      { id: 1, result: "0x" },
      { id: 2, result: "0x2" },
      { id: 4, result: "0x3" },
    ]);
    const [nonce, pairs, last] = await sendRpcBatch(upstream(answer), [
      ethGetTransactionCount(a),
      [[ethGetStorageAt(a, "0x00"), ethGetBalance(a)] as const, [ethGetStorageAt(b, "0x00")] as const],
      ethBlockNumber(),
    ]);
    expect(nonce).toEqual(ok(1n));
    expect(pairs).toEqual([[ok("0x"), ok(2n)], [err({ code: "missing" })]]);
    expect(last).toEqual(ok(3n));
  });
});

describe("a batch past the node's batch limit (maxBatchCalls)", () => {
  /** A node taking `limit` calls a batch: answers each call's id as its result, in turn from `answers`. */
  function capped(limit: number, answers: Array<"answer" | UpstreamResult>) {
    const sent: unknown[][] = [];
    return {
      sent,
      maxBatchCalls: limit,
      async send(payload: unknown): Promise<UpstreamResult> {
        const calls = payload as Array<{ id: number }>;
        sent.push(calls.map((call) => call.id));
        const answer = answers.shift() ?? "answer";
        return answer === "answer"
          ? ok(calls.map((call) => ({ id: call.id, result: `0x${call.id}` })))
          : answer;
      },
    };
  }
  const five = [0, 1, 2, 3, 4].map(() => ethBlockNumber());

  it("sends it in parts of the limit, in order, each call keeping its position as id", async () => {
    const node = capped(2, []);
    expect(await sendRpcBatch(node, five)).toEqual([ok(0n), ok(1n), ok(2n), ok(3n), ok(4n)]);
    expect(node.sent).toEqual([[0, 1], [2, 3], [4]]);
  });

  it("fails only its own calls where a part is answered with no batch", async () => {
    const refused = ok({ jsonrpc: "2.0", id: null, error: { code: -32600, message: "batch too large" } });
    const node = capped(2, ["answer", refused]);
    const badBody = err({ code: "upstream", failure: "bad_body" });
    expect(await sendRpcBatch(node, five)).toEqual([ok(0n), ok(1n), badBody, badBody, ok(4n)]);
  });

  it("sends no part after a round trip that failed, and fails their calls with it", async () => {
    const node = capped(2, ["answer", err("timeout")]);
    const timeout = err({ code: "upstream", failure: "timeout" });
    expect(await sendRpcBatch(node, five)).toEqual([ok(0n), ok(1n), timeout, timeout, timeout]);
    expect(node.sent).toEqual([
      [0, 1],
      [2, 3],
    ]);
  });
});
