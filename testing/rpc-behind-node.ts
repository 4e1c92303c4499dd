/**
 * The set-up of the `/rpc` tests whose chain misbehaves in one way: a real devnet, a pass-through
 * node in front of it that makes the fault (each test's own, named as such there), an origin whose
 * chain is that node, and one agent's read token. Called in a describe block, as vitest hooks.
 */
import { afterAll, beforeAll } from "vitest";
import { startDevnet } from "../devnet/index.ts";
import { createTestDatabase, type TestDatabase } from "./database.ts";
import { startTestOrigin, type TestOrigin } from "./origin.ts";
import { provisionedIdentity, seedFreeKeys } from "./seed.ts";

type Node = { url: string; close(): Promise<void> };

export type RpcBehindNode<N extends Node> = {
  readonly origin: TestOrigin;
  readonly node: N;
  /** The agent's bearer token (capability read). */
  readonly token: string;
  /** POST {base}/agent/v1/rpc with the token: the status and the parsed answer. */
  rpc(body: unknown): Promise<{ status: number; body: unknown }>;
};

export function useRpcBehindNode<N extends Node>(
  startNode: (devnetUrl: string) => Promise<N>,
  options: { beforeClose?: (node: N) => void } = {},
): RpcBehindNode<N> {
  let testDb: TestDatabase | undefined;
  let devnet: Awaited<ReturnType<typeof startDevnet>> | undefined;
  let node: N | undefined;
  let origin: TestOrigin | undefined;
  let token = "";

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 1);
    devnet = await startDevnet({ port: 0 });
    node = await startNode(devnet.url);
    origin = await startTestOrigin({ database: testDb.handle, rpcUrl: node.url });
    token = (await provisionedIdentity(testDb.handle.db, { capabilities: ["read"], origin: "operator" }))
      .token;
  });
  afterAll(async () => {
    if (node) options.beforeClose?.(node);
    await origin?.close();
    await node?.close();
    await devnet?.close();
    await testDb?.drop();
  });

  const started = <T>(value: T | undefined, name: string): T => {
    if (value === undefined) throw new Error(`${name} is not started yet (use it inside a test)`);
    return value;
  };
  return {
    get origin() {
      return started(origin, "the origin");
    },
    get node() {
      return started(node, "the node");
    },
    get token() {
      return token;
    },
    async rpc(body) {
      const response = await fetch(`${started(origin, "the origin").base}/agent/v1/rpc`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      return { status: response.status, body: (await response.json()) as unknown };
    },
  };
}
