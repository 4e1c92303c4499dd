import { randomBytes } from "node:crypto";
import { privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { useStackEdge } from "../testing/edge.ts";
import { send, sendUnchecked } from "../testing/http.ts";
import { useMoneyStack } from "../testing/stack.ts";

// The origin takes a request whose line and headers fit in 16 KiB (docs/api.md, "Limits"), and
// answers 431 headers_too_large past that. Through the real worker in Miniflare, in front of the
// real origin (Postgres, enclave, devnet, x402 on), a request within that budget must reach the
// route as it does directly: what the edge adds to it must not spend the client's share. The URL
// the client requested, which x402's answers name, still reaches x402's routes, however spelled.

const EDGE_SECRET = randomBytes(32).toString("hex");
/** A query this long, with the request's few other headers, fits the origin's 16 KiB. */
const LONG_QUERY = `q=${"a".repeat(12_000)}`;

const stack = useMoneyStack(
  {
    x402: { amountUnits: 10_000n, payTo: privateKeyToAccount(`0x${"22".repeat(32)}`).address },
    env: { AGENT_EDGE_SHARED_SECRET: EDGE_SECRET },
  },
  { timeoutMs: 180_000 },
);
const edge = useStackEdge(stack, EDGE_SECRET);

describe("the origin's header budget through the edge", () => {
  it("a gateway request with a 12 KB query is answered by its route, as it is straight at the origin", async () => {
    const agent = await stack.newAgent();
    const headers = { authorization: `Bearer ${agent.token}` };
    const direct = await send(`${stack.origin.base}/agent/v1/policy?${LONG_QUERY}`, { headers });
    expect(direct.status).toBe(200);
    // Mutation: an edge that copies the whole URL into a header of its own on every route doubles
    // the query's size at the origin, which answers 431 headers_too_large.
    const throughEdge = await sendUnchecked(`${edge.url}/77/agent/v1/policy?${LONG_QUERY}`, { headers });
    expect([throughEdge.status, throughEdge.body]).toEqual([200, direct.body]);
    const document = await sendUnchecked(`${edge.url}/77/agent/v1/openapi.json?${LONG_QUERY}`);
    expect(document.status).toBe(200);
  });

  it("an x402 quote names the URL requested at the edge, in every spelling that reaches the demo", async () => {
    for (const path of [
      "/77/x402/demo",
      "/77/%78402/demo",
      "/77/x402/%64emo",
      "/77/agent/v1/../../x402/demo",
    ]) {
      const answer = await sendUnchecked(`${edge.url}${path}`, { rawPath: `${path}?ref=1` });
      expect(answer.status, path).toBe(402);
      const { resource } = answer.body as { resource: { url: string } };
      // Mutation: an edge that tells only paths spelled `{base}/x402/` the requested URL lets
      // `%78402` reach the demo without it, whose quote then names the origin's own URL.
      expect(new URL(resource.url).origin, path).toBe(edge.url);
      expect(resource.url, path).toContain("?ref=1");
    }
  });
});
