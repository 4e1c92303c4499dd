/**
 * A JSON-RPC pass-through in front of the devnet that runs a test's step right after the devnet
 * answered a chosen request (or batch) and before the answer goes back: with the devnet holding
 * its blocks (dev_setAutomine false), the step can mine one (dev_mine) between a client's read and
 * its next call, an instant a test cannot hit from outside. No fake: every answer is the devnet's
 * own. Everything else passes through unchanged. Loopback only.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { startLoopbackServer } from "./loopback-server.ts";

type RpcRequest = { jsonrpc: "2.0"; id: unknown; method: string; params?: unknown[] };

export type RpcAfterReadProxy = {
  url: string;
  /**
   * Runs `step` once, after the devnet answered the first request (or batch) `pick` chooses and
   * before that answer is handed back; resolves once it has run.
   */
  afterNext(pick: (requests: readonly RpcRequest[]) => boolean, step: () => Promise<void>): Promise<void>;
  close(): Promise<void>;
};

export async function startRpcAfterReadProxy(targetUrl: string): Promise<RpcAfterReadProxy> {
  let armed:
    | { pick: (requests: readonly RpcRequest[]) => boolean; step: () => Promise<void>; done: () => void }
    | undefined;

  const handle = async (request: IncomingMessage, response: ServerResponse): Promise<void> => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks).toString();
    const answer = await fetch(targetUrl, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    const text = await answer.text();
    const parsed = JSON.parse(body) as RpcRequest | RpcRequest[];
    const requests = Array.isArray(parsed) ? parsed : [parsed];
    if (armed?.pick(requests)) {
      const { step, done } = armed;
      armed = undefined;
      await step();
      done();
    }
    response.writeHead(answer.status, { "content-type": "application/json" });
    response.end(text);
  };

  const server = await startLoopbackServer(handle);
  return {
    url: server.url,
    afterNext: (pick, step) =>
      new Promise<void>((resolve) => {
        armed = { pick, step, done: resolve };
      }),
    close: () => server.close(),
  };
}
