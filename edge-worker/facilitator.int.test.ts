import { describe, expect, it } from "vitest";
import { HEADER_CLIENT_IP } from "../shared/constants.ts";
import { sleep } from "../shared/sleep.ts";
// The origin here is a stand-in whose answers are not the origin's: no OpenAPI check.
import { sendUnchecked as send } from "../testing/http.ts";
import { type OriginAnswer, useEdgeBeforeAnsweringOrigin } from "./testing/answering-origin.ts";

// The real worker in Miniflare, in front of the origin's place-holder: a signed payment the origin
// answered 429 is answered that 429 by the edge until its Retry-After, for that client address and
// route only (edge-worker/facilitator.ts); everything else reaches the origin as sent.

const REQUEST_ID = /^req_[0-9a-f]{16}$/;
const REFUSAL = JSON.stringify({
  isValid: false,
  invalidReason: "rate_limited",
  payer: `0x${"ab".repeat(20)}`,
});

const VALID: OriginAnswer = {
  status: 200,
  headers: { "content-type": "application/json" },
  body: JSON.stringify({ isValid: true, payer: `0x${"ab".repeat(20)}` }),
};
const PAST_WINDOW: OriginAnswer = {
  status: 429,
  headers: { "content-type": "application/json", "retry-after": "2" },
  body: REFUSAL,
};

const stand = useEdgeBeforeAnsweringOrigin(VALID);

/** A facilitator request for a payment with this signature, spaced as `indent` says. */
function payment(signature: string, indent?: number): string {
  return JSON.stringify(
    {
      x402Version: 2,
      paymentPayload: {
        x402Version: 2,
        payload: {
          signature,
          authorization: { from: `0x${"ab".repeat(20)}`, nonce: `0x${"01".repeat(32)}` },
        },
      },
      paymentRequirements: { scheme: "exact" },
    },
    null,
    indent,
  );
}

const SIGNATURE = `0x${"5a".repeat(64)}1b`;
const OTHER_SIGNATURE = `0x${"5b".repeat(64)}1c`;

function post(
  operation: "verify" | "settle",
  body: string,
  localAddress = "127.0.0.41",
  headers: Record<string, string> = {},
) {
  return send(`${stand.edge.url}/77/x402/facilitator/${operation}`, {
    method: "POST",
    body,
    localAddress,
    headers,
  });
}

describe("the edge's facilitator routes", () => {
  it("answers a payment the origin refused with 429 itself until the Retry-After, for that address and route only", async () => {
    stand.answer(PAST_WINDOW);
    const first = await post("verify", payment(SIGNATURE));
    expect(first.status).toBe(429);
    expect(stand.origin.received).toHaveLength(1);
    const started = Date.now();
    // The same payment again, sent with other spacing too: the edge's answer is the origin's.
    for (const body of [
      payment(SIGNATURE),
      payment(SIGNATURE, 2),
      payment(SIGNATURE.toUpperCase().replace("0X", "0x")),
    ]) {
      const again = await post("verify", body);
      expect(again.status).toBe(429);
      expect(again.body).toEqual(JSON.parse(REFUSAL));
      expect(again.headers["content-type"]).toBe("application/json");
      expect(again.headers["x-request-id"]).toMatch(REQUEST_ID);
      const seconds = Number(again.headers["retry-after"]);
      expect(seconds).toBeGreaterThanOrEqual(1);
      expect(seconds).toBeLessThanOrEqual(2);
    }
    expect(stand.origin.received).toHaveLength(1);

    // Another address, another payment, the other route: each reaches the origin.
    stand.answer(VALID);
    expect((await post("verify", payment(SIGNATURE), "127.0.0.42")).status).toBe(200);
    expect((await post("verify", payment(OTHER_SIGNATURE))).status).toBe(200);
    expect((await post("settle", payment(SIGNATURE))).status).toBe(200);
    expect(stand.origin.received.map((seen) => [seen.url, seen.headers[HEADER_CLIENT_IP]])).toEqual([
      ["/77/x402/facilitator/verify", "127.0.0.41"],
      ["/77/x402/facilitator/verify", "127.0.0.42"],
      ["/77/x402/facilitator/verify", "127.0.0.41"],
      ["/77/x402/facilitator/settle", "127.0.0.41"],
    ]);

    // Once the wait is over the payment goes to the origin again.
    await sleep(2_000 - (Date.now() - started) + 50);
    expect((await post("verify", payment(SIGNATURE))).status).toBe(200);
    expect(stand.origin.received).toHaveLength(5);
  });

  it("remembers no answer but a 429 with a wait in whole seconds", async () => {
    const answers: OriginAnswer[] = [
      VALID,
      { ...PAST_WINDOW, headers: { "content-type": "application/json" } },
      { ...PAST_WINDOW, headers: { "content-type": "application/json", "retry-after": "0" } },
      { ...PAST_WINDOW, status: 503 },
    ];
    for (const answer of answers) {
      stand.answer(answer);
      await post("verify", payment(SIGNATURE, 1), "127.0.0.43");
      await post("verify", payment(SIGNATURE, 1), "127.0.0.43");
    }
    expect(stand.origin.received).toHaveLength(answers.length * 2);
  });

  it("passes on, byte for byte, a body that is no payment or comes without its length, and remembers nothing of it", async () => {
    stand.answer(PAST_WINDOW);
    const bodies = [
      "{not json",
      JSON.stringify({ paymentPayload: { payload: { signature: "0x1234" } } }),
      JSON.stringify([payment(SIGNATURE)]),
    ];
    for (const body of bodies) {
      expect((await post("verify", body, "127.0.0.44")).status).toBe(429);
      expect((await post("verify", body, "127.0.0.44")).status).toBe(429);
    }
    const chunked = payment(SIGNATURE, 3);
    for (let i = 0; i < 2; i++) {
      const answered = await post("verify", chunked, "127.0.0.45", { "transfer-encoding": "chunked" });
      expect(answered.status).toBe(429);
    }
    expect(stand.origin.received.map((seen) => seen.body)).toEqual([
      ...bodies.flatMap((body) => [body, body]),
      chunked,
      chunked,
    ]);
  });
});
