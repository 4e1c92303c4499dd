import { describe, expect, it } from "vitest";
import { readBody, startLoopbackServer } from "../../testing/loopback-server.ts";
import { useRpcBehindNode } from "../../testing/rpc-behind-node.ts";

/**
 * A fake node (named as one: our devnet takes batches of up to 1,000, more than /rpc forwards) in
 * front of the real devnet, which refuses a batch over 3 elements as hosted nodes do, with one
 * error of id null, and passes every other call through.
 */
async function startBatchLimitedNode(target: string) {
  const refusal = { jsonrpc: "2.0", id: null, error: { code: -32600, message: "batch too large (max 3)" } };
  return startLoopbackServer(async (req, res) => {
    const body = await readBody(req);
    const parsed = JSON.parse(body) as unknown;
    if (Array.isArray(parsed) && parsed.length > 3) {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(refusal));
      return;
    }
    const answer = await fetch(target, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    res.writeHead(answer.status, { "content-type": "application/json" }).end(await answer.text());
  });
}

describe("/rpc: a batch the node refuses as a whole (real devnet and database behind a batch-limited node)", () => {
  const { rpc } = useRpcBehindNode(startBatchLimitedNode);
  const call = (id: number) => ({ jsonrpc: "2.0", id, method: "eth_chainId", params: [] });

  it("gives each element the node's own error, where it said the node gave no answer", async () => {
    const within = await rpc([call(1), call(2)]);
    expect(within).toEqual({
      status: 200,
      body: [
        { jsonrpc: "2.0", id: 1, result: "0x4d" },
        { jsonrpc: "2.0", id: 2, result: "0x4d" },
      ],
    });
    const over = await rpc([call(1), call(2), call(3), call(4)]);
    expect(over.status).toBe(200);
    expect(over.body).toEqual(
      [1, 2, 3, 4].map((id) => ({
        jsonrpc: "2.0",
        id,
        error: { code: -32600, message: "batch too large (max 3)" },
      })),
    );
  });
});
