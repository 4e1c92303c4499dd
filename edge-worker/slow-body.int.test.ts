import { privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { BODY_DEADLINE_MS } from "../origin/http/read-body.ts";
import { sleep } from "../shared/sleep.ts";
import { useStackEdge } from "../testing/edge.ts";
import { type HalfSentAnswer, sendHalfBody } from "../testing/half-sent.ts";
import { useMoneyStack } from "../testing/stack.ts";

// A client sends its headers and the first byte of its body through the real worker in Miniflare,
// then nothing, in front of the real origin (Postgres, enclave, devnet) with x402 on. The origin
// answers such a body 408 at its deadline (origin/http/slow-body.int.test.ts); through the edge the
// client must be answered by then too, whichever of them waits for the body.

const EDGE_SECRET = "slow-body-through-the-edge-0123456789abcdef0123456789";
/** How late a 408 may come after the deadline on a shared machine. */
const SLACK_MS = 3_000;

const stack = useMoneyStack(
  { x402: { amountUnits: 10_000n, payTo: privateKeyToAccount(`0x${"11".repeat(32)}`).address } },
  { timeoutMs: 180_000 },
);
const edge = useStackEdge(stack, EDGE_SECRET);

type Envelope = { error: { code: string; message: string; request_id: string } };

describe("a stalled request body through the edge", () => {
  it("is answered 408 request_timeout at the body deadline on the facilitator's verify and settle, with a length or chunked", async () => {
    const sentAt = Date.now();
    const slow = ["verify", "settle"].flatMap((operation) =>
      [{ declaredLength: 600 }, {}].map((framing) => ({
        what: `${operation} ${"declaredLength" in framing ? "with a length" : "chunked"}`,
        request: sendHalfBody(`${edge.url}/77/x402/facilitator/${operation}`, framing),
      })),
    );
    try {
      // Mutation: an edge that waits for the whole body before anything (to read the payment's
      // signature) without a deadline leaves the client with a length waiting for ever: no answer.
      const noAnswer = sleep(BODY_DEADLINE_MS + SLACK_MS).then(() => ({ kind: "none" }) as const);
      const answers = await Promise.all(
        slow.map(async ({ what, request }) => ({
          what,
          answer: await Promise.race([request.answer, noAnswer]),
        })),
      );
      for (const { what, answer } of answers) {
        expect(answer.kind, what).toBe("answered");
        const answered = answer as Extract<HalfSentAnswer, { kind: "answered" }> & { at: number };
        expect(answered.status, what).toBe(408);
        const body = JSON.parse(answered.body) as Envelope;
        expect(body.error.code, what).toBe("request_timeout");
        expect(body.error.request_id, what).toMatch(/^req_[0-9a-f]{16}$/);
        expect(answered.at - sentAt, what).toBeGreaterThanOrEqual(BODY_DEADLINE_MS - 100);
        expect(answered.at - sentAt, what).toBeLessThan(BODY_DEADLINE_MS + SLACK_MS);
      }
    } finally {
      for (const { request } of slow) request.destroy();
    }
  });
});
