import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { MAX_JSON_DEPTH } from "../../shared/json-depth.ts";
import { send } from "../../testing/http.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { queryRows } from "../db/client.ts";

// Bodies nested thousands deep, within their routes' size limits, against the real stack (origin,
// enclave, devnet, Postgres): a clear refusal naming the depth, never a 500 or a failure blamed on
// the chain, and nothing recorded.

/** `depth` arrays, one inside the next: two bytes a level. */
const nested = (depth: number): string => `${"[".repeat(depth)}${"]".repeat(depth)}`;
/** Deep enough to overflow a recursive JSON.stringify, and 24 KB: within the authorize route's 32 KiB. */
const DEEP = 12_000;

describe("JSON nested deeper than the service reads (real stack)", () => {
  const stack = useMoneyStack({ x402: { amountUnits: 1000n, payTo: "enclave-payee" } });
  const actions = async (): Promise<number> => {
    const [row] = await queryRows<{ n: number }>(
      stack.db.handle.db,
      sql`select count(*)::int as n from agent_actions`,
    );
    return row!.n;
  };

  it("an x402 quote nested 12,000 deep is 400 validation_failed naming the depth, not a 500, to authorize and to the policy check; nothing is recorded", async () => {
    const agent = await stack.newAgent();
    const headers = { authorization: `Bearer ${agent.token}` };
    const quote = (part: "extensions" | "accepts" | "resource") =>
      `{"x402Version":2,"resource":{"url":"https://seller.example/r"${part === "resource" ? `,"x":${nested(DEEP)}` : ""}},` +
      `"accepts":[{"scheme":"exact"${part === "accepts" ? `,"x":${nested(DEEP)}` : ""}}]` +
      `${part === "extensions" ? `,"extensions":{"x":${nested(DEEP)}}` : ""}}`;
    const before = await actions();
    for (const part of ["extensions", "accepts", "resource"] as const) {
      const bodies: Array<[string, string]> = [
        ["/agent/v1/x402/authorize", `{"payment_required":${quote(part)},"idempotency_key":"deep-${part}"}`],
        ["/agent/v1/policy/check", `{"x402":{"payment_required":${quote(part)}}}`],
      ];
      for (const [path, body] of bodies) {
        const answer = await send(`${stack.origin.base}${path}`, { method: "POST", headers, body });
        // Mutation: without the depth check in json-body.ts each is 500 internal_error (the
        // schema's size refinements overflow the stack in JSON.stringify).
        expect({ path, part, status: answer.status, body: answer.body }).toEqual({
          path,
          part,
          status: 400,
          body: {
            error: {
              code: "validation_failed",
              message: `the body nests deeper than ${MAX_JSON_DEPTH} levels`,
              request_id: expect.any(String),
            },
          },
        });
      }
    }
    expect(await actions()).toBe(before);
  });

  it("an /rpc request whose params nest 12,000 deep is refused alone (-32602), and the rest of its batch is answered by the chain, not failed as upstream unavailable", async () => {
    const agent = await stack.newAgent();
    const body =
      `[{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]},` +
      `{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":${nested(DEEP)}}]`;
    const answer = await send(`${stack.origin.base}/agent/v1/rpc`, {
      method: "POST",
      headers: { authorization: `Bearer ${agent.token}` },
      body,
    });
    expect(answer.status).toBe(200);
    // Mutation: without the depth check in rpc-call.ts both are -32000 "upstream unavailable:
    // unreachable" (the upstream payload's JSON.stringify overflows the stack).
    expect(answer.body).toEqual([
      { jsonrpc: "2.0", id: 1, result: "0x4d" },
      {
        jsonrpc: "2.0",
        id: 2,
        error: {
          code: -32602,
          message: `params nest deeper than ${MAX_JSON_DEPTH} levels`,
          data: expect.objectContaining({ allowed_methods: expect.any(Array) }),
        },
      },
    ]);
  });
});
