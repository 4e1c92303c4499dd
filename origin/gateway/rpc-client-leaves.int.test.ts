import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { useRpcBehindNode } from "../../testing/rpc-behind-node.ts";
import { RPC_IN_FLIGHT, RPC_PREFETCH_IN_FLIGHT } from "./limits.ts";

/**
 * A slow chain, named as a fault: a pass-through in front of the real devnet that holds every call
 * until the test lets it go, so the calls the origin has sent stay in flight however the machine runs.
 */
async function startHoldingChain(target: string) {
  const held: Array<() => void> = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      held.push(() => {
        const forward = httpRequest(
          target,
          { method: "POST", headers: { "content-type": "application/json" } },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
          },
        );
        forward.on("error", () => res.destroy());
        forward.end(Buffer.concat(chunks));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** Calls that reached the chain and wait for their answer. */
    get held() {
      return held.length;
    },
    release: () => {
      for (const answer of held.splice(0)) answer();
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe("/rpc: clients that leave before their answer (real devnet and database, behind a slow chain)", () => {
  const stack = useRpcBehindNode(startHoldingChain, { beforeClose: (chain) => chain.release() });

  /**
   * Sends one call and hangs up as soon as the chain holds it: the answer this client would have
   * had is "left". A call the origin refuses is answered before it reaches the chain.
   */
  const callAndLeave = (): Promise<{ status: number } | "left"> =>
    new Promise((resolve, reject) => {
      const before = stack.node.held;
      const req = httpRequest(`${stack.origin.base}/agent/v1/rpc`, {
        method: "POST",
        headers: { authorization: `Bearer ${stack.token}`, "content-type": "application/json" },
        agent: false,
      });
      const watch = setInterval(() => {
        if (stack.node.held === before) return;
        clearInterval(watch);
        req.destroy();
        resolve("left");
      }, 5);
      req.on("response", (res) => {
        clearInterval(watch);
        res.resume();
        resolve({ status: res.statusCode ?? 0 });
      });
      req.on("error", (error) => {
        clearInterval(watch);
        if (!req.destroyed || stack.node.held === before) reject(error);
      });
      req.end(
        JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_getBlockByNumber", params: ["latest", true] }),
      );
    });

  it("keeps the calls a leaving client sent in flight under the agent's /rpc limits: the chain is sent no more, the rest are 429", async () => {
    // Mutation: a call's place given back when its client hangs up, with its chain call still out.
    const outcomes: Array<{ status: number } | "left"> = [];
    for (let i = 0; i < 24; i++) outcomes.push(await callAndLeave());
    const bound = RPC_IN_FLIGHT.perAgent + RPC_PREFETCH_IN_FLIGHT.perToken;
    expect(
      stack.node.held,
      `calls in flight at the chain for one agent, at most ${bound}`,
    ).toBeLessThanOrEqual(bound);
    expect(outcomes.filter((o) => o !== "left").map((o) => (o as { status: number }).status)).toContain(429);

    // Once the chain has answered the calls of the clients that left, their places come back.
    stack.node.release();
    await expect.poll(async () => (await callAnswered()).status, { timeout: 10_000 }).toBe(200);
  });

  const callAnswered = async (): Promise<{ status: number }> => {
    const answer = fetch(`${stack.origin.base}/agent/v1/rpc`, {
      method: "POST",
      headers: { authorization: `Bearer ${stack.token}`, "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId" }),
    });
    // The chain holds new calls too: let each go as it comes.
    const releasing = setInterval(() => stack.node.release(), 10);
    try {
      return { status: (await answer).status };
    } finally {
      clearInterval(releasing);
    }
  };
});
