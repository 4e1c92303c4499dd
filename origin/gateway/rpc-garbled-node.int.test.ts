import { describe, expect, it } from "vitest";
import { MAX_JSON_DEPTH } from "../../shared/json-depth.ts";
import { readBody, startLoopbackServer } from "../../testing/loopback-server.ts";
import { useRpcBehindNode } from "../../testing/rpc-behind-node.ts";

/** The hash whose transaction the garbling node answers with garbage. */
const GARBLED_HASH = `0x${"ab".repeat(32)}`;
/** About 400 KB of nested arrays: well under the 2 MiB an answer may take, far past what a walk survives. */
const DEEP = `${"[".repeat(200_000)}${"]".repeat(200_000)}`;

/**
 * A garbling node, named as a fault (no real node answers this): a pass-through in front of the real
 * devnet that answers eth_getTransactionByHash of GARBLED_HASH with a result nested 200,000 deep,
 * or, for a batch whose first call is eth_blockNumber with params ["deep-error"], one error of id
 * null whose data nests as deep.
 */
async function startGarblingNode(target: string) {
  type Call = { id: number; method: string; params?: unknown[] };
  type Answer = { id: number; result?: unknown };
  return startLoopbackServer(async (req, res) => {
    const body = await readBody(req);
    const parsed = JSON.parse(body) as Call | Call[];
    const calls = Array.isArray(parsed) ? parsed : [parsed];
    if (calls[0]?.params?.[0] === "deep-error") {
      res
        .writeHead(200)
        .end(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"no","data":${DEEP}}}`);
      return;
    }
    const garbled = new Set(
      calls
        .filter((call) => call.method === "eth_getTransactionByHash" && call.params?.[0] === GARBLED_HASH)
        .map((call) => call.id),
    );
    const forwarded = await fetch(target, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    const answered = (await forwarded.json()) as Answer | Answer[];
    for (const item of Array.isArray(answered) ? answered : [answered]) {
      if (garbled.has(item.id)) item.result = "__deep__";
    }
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify(answered).replace('"__deep__"', DEEP));
  });
}

describe("/rpc behind a node that answers garbage (real devnet and database, behind a garbling node)", () => {
  const { rpc } = useRpcBehindNode(startGarblingNode);

  const call = (id: number, method: string, params: unknown[] = []) => ({
    jsonrpc: "2.0",
    id,
    method,
    params,
  });
  const tooDeep = { code: -32000, message: `the chain's answer nests deeper than ${MAX_JSON_DEPTH} levels` };

  it("answers a result nested past the depth limit with a JSON-RPC error of its own in a 200, and the rest of its batch as the chain did", async () => {
    // Mutation: the node's answer passed on as it came: the route's JSON.stringify overflows, a 500.
    expect(await rpc(call(1, "eth_getTransactionByHash", [GARBLED_HASH]))).toEqual({
      status: 200,
      body: { jsonrpc: "2.0", id: 1, error: tooDeep },
    });
    expect(
      await rpc([
        call(1, "eth_chainId"),
        call(2, "eth_getTransactionByHash", [GARBLED_HASH]),
        call(3, "eth_chainId"),
      ]),
    ).toEqual({
      status: 200,
      body: [
        { jsonrpc: "2.0", id: 1, result: "0x4d" },
        { jsonrpc: "2.0", id: 2, error: tooDeep },
        { jsonrpc: "2.0", id: 3, result: "0x4d" },
      ],
    });
  });

  it("answers a whole-call error whose data nests past the limit with that error, not a 500", async () => {
    expect(await rpc([call(1, "eth_blockNumber", ["deep-error"]), call(2, "eth_chainId")])).toEqual({
      status: 200,
      body: [
        { jsonrpc: "2.0", id: 1, error: tooDeep },
        { jsonrpc: "2.0", id: 2, error: tooDeep },
      ],
    });
  });
});
