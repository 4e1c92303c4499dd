import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { publicClientFor } from "../../devnet/testing.ts";
import { MAX_JSON_DEPTH } from "../../shared/json-depth.ts";
import { send } from "../../testing/http.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { envelope, fundedPayer } from "../../testing/x402-payer.ts";
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

  it("a signed payment whose payload nests thousands deep is refused invalid_payload in x402's own shapes, not a 500, by verify, settle and the demo; nothing is paid or recorded", async () => {
    const chain = publicClientFor(stack.devnet.url);
    const payer = await fundedPayer(stack.devnet.url);
    const before = await chain.getBalance({ address: payer.address });
    const paid = await envelope(`${stack.origin.base}/x402/demo`, payer);
    /** The envelope as sent, with `x` nested `depth` deep beside the payload's own fields. */
    const deepened = (depth: number) =>
      JSON.stringify(paid).replace('"payload":{', `"payload":{"x":${nested(depth)},`);
    const facilitatorBody = `{"x402Version":2,"paymentPayload":${deepened(20_000)},"paymentRequirements":${JSON.stringify(paid.accepted)}}`;
    // Mutation: without the depth check in facilitator.ts settle is 500 internal_error, in the
    // gateway's envelope, which an x402 client cannot read (the settler's hash of the payload
    // overflows the stack); without the one in payment.ts, so is the demo.
    const settle = await send(`${stack.origin.base}/x402/facilitator/settle`, {
      method: "POST",
      body: facilitatorBody,
    });
    expect({ status: settle.status, body: settle.body }).toMatchObject({
      status: 400,
      body: { success: false, errorReason: "invalid_payload", transaction: "" },
    });
    const verify = await send(`${stack.origin.base}/x402/facilitator/verify`, {
      method: "POST",
      body: facilitatorBody,
    });
    // Verify says the same: before the check it called the payment valid, which settle then failed.
    expect({ status: verify.status, body: verify.body }).toEqual({
      status: 400,
      body: { isValid: false, invalidReason: "invalid_payload" },
    });
    // 5,000 deep: as deep as a PAYMENT-SIGNATURE header within the 16 KiB of headers holds.
    const demo = await send(`${stack.origin.base}/x402/demo`, {
      headers: { "payment-signature": Buffer.from(deepened(5_000)).toString("base64") },
    });
    expect({ status: demo.status, error: (demo.body as { error?: string }).error }).toEqual({
      status: 402,
      error: "invalid_payload",
    });
    const [settlements] = await queryRows<{ n: number }>(
      stack.db.handle.db,
      sql`select count(*)::int as n from x402_settlements where payer = ${payer.address.toLowerCase()}`,
    );
    expect(settlements!.n).toBe(0);
    expect(await chain.getBalance({ address: payer.address })).toBe(before);
  });
});
