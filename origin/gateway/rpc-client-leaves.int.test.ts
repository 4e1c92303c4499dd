import { createServer, request as httpRequest, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevnet } from "../../devnet/index.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";
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
  let testDb: TestDatabase;
  let devnet: Awaited<ReturnType<typeof startDevnet>>;
  let chain: Awaited<ReturnType<typeof startHoldingChain>>;
  let origin: TestOrigin;
  let token = "";

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 1);
    devnet = await startDevnet({ port: 0 });
    chain = await startHoldingChain(devnet.url);
    origin = await startTestOrigin({ database: testDb.handle, rpcUrl: chain.url });
    token = (await provisionedIdentity(testDb.handle.db, { capabilities: ["read"], origin: "operator" }))
      .token;
  });
  afterAll(async () => {
    chain?.release();
    await origin?.close();
    await chain?.close();
    await devnet?.close();
    await testDb?.drop();
  });

  /**
   * Sends one call and hangs up as soon as the chain holds it: the answer this client would have
   * had is "left". A call the origin refuses is answered before it reaches the chain.
   */
  const callAndLeave = (): Promise<{ status: number } | "left"> =>
    new Promise((resolve, reject) => {
      const before = chain.held;
      const req = httpRequest(`${origin.base}/agent/v1/rpc`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        agent: false,
      });
      const watch = setInterval(() => {
        if (chain.held === before) return;
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
        if (!req.destroyed || chain.held === before) reject(error);
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
    expect(chain.held, `calls in flight at the chain for one agent, at most ${bound}`).toBeLessThanOrEqual(
      bound,
    );
    expect(outcomes.filter((o) => o !== "left").map((o) => (o as { status: number }).status)).toContain(429);

    // Once the chain has answered the calls of the clients that left, their places come back.
    chain.release();
    await expect.poll(async () => (await callAnswered()).status, { timeout: 10_000 }).toBe(200);
  });

  const callAnswered = async (): Promise<{ status: number }> => {
    const answer = fetch(`${origin.base}/agent/v1/rpc`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId" }),
    });
    // The chain holds new calls too: let each go as it comes.
    const releasing = setInterval(() => chain.release(), 10);
    try {
      return { status: (await answer).status };
    } finally {
      clearInterval(releasing);
    }
  };
});
