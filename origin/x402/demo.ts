/**
 * `GET {base}/x402/demo` (SPEC "x402 surfaces"): unpaid, a 402 with the quote in the
 * body and, Base64, in PAYMENT-REQUIRED; paid (PAYMENT-SIGNATURE), decode, check and settle
 * through the in-process facilitator (the settle batch reads the payment's facts on chain, the
 * last checks of verify, while it claims the payment), and 200 with PAYMENT-RESPONSE only once
 * the settler transaction's receipt is 0x1. Every failure is a 402 whose `error` names the
 * reason; after a settle (refused on the chain's facts, pending, failed, or an earlier
 * presentation) PAYMENT-RESPONSE carries its outcome, naming the original transaction if any. A paid retry past the client's window
 * (client-limit.ts) is 429 with the quote, `error` rate_limited, and Retry-After.
 */
import type { Context } from "hono";
import { Hono } from "hono";
import type { AppEnv } from "../http/env.ts";
import { route } from "../openapi/route.ts";
import type { ClientLimit } from "./client-limit.ts";
import { decodePaymentHeader } from "./payment.ts";
import { X402_REASONS, type X402Reason } from "./reasons.ts";
import { encodeHeader, paymentRequired, type ResourceInfo } from "./requirements.ts";
import type { ResourceUrlOf } from "./resource-url.ts";
import type { SettleResponse } from "./settle.ts";
import type { X402Runtime } from "./setup.ts";
import { checkContext, checkPayment, type VerifyDeps } from "./verify.ts";

export type DemoRouterDeps = {
  runtime: X402Runtime;
  verifyDeps: VerifyDeps;
  limit: ClientLimit;
  /** The public URL the quote names, never the origin's own (resource-url.ts). */
  resourceUrlOf: ResourceUrlOf;
};

export function createDemoRouter({
  runtime,
  verifyDeps,
  limit,
  resourceUrlOf,
}: DemoRouterDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  route(app, "/x402/demo", "x402Demo", async (c) => {
    const resource: ResourceInfo = {
      url: resourceUrlOf(c),
      mimeType: "application/json",
      description: "x402 demo resource: a paid JSON answer",
    };
    const refuse = (reason?: X402Reason, settlement?: SettleResponse): Response => {
      const quote = paymentRequired(resource, runtime.requirements, reason);
      c.header("PAYMENT-REQUIRED", encodeHeader(quote));
      if (settlement) c.header("PAYMENT-RESPONSE", encodeHeader(settlement));
      c.header("Cache-Control", "no-store");
      return c.json(quote, 402);
    };
    const header = c.req.header("PAYMENT-SIGNATURE");
    if (header === undefined) return refuse();
    // A paid retry reads the chain and may settle: it counts against the client's window.
    const wait = limit(c.get("clientIp"));
    if (wait !== undefined) {
      c.header("Retry-After", String(wait));
      c.header("Cache-Control", "no-store");
      return c.json(paymentRequired(resource, runtime.requirements, X402_REASONS.rateLimited), 429);
    }
    const decoded = decodePaymentHeader(header);
    if (!decoded.ok) return refuse(decoded.error.reason);
    const envelope = decoded.value;
    const checked = checkPayment(envelope, runtime.requirements, checkContext(verifyDeps));
    if (!checked.ok) return refuse(checked.error.reason);
    const outcome = await runtime.settler.settle({
      authorization: checked.value.authorization,
      signature: envelope.signature,
      requirement: envelope.accepted,
      payload: envelope.raw.payload,
    });
    // Every settle that did not pay reports its outcome in PAYMENT-RESPONSE (SPEC "x402 surfaces"):
    // refused on the chain's facts (balance, nonce; no transaction), pending or failed, or a
    // payment presented again (`duplicate`), which names the original transaction, settled or
    // pending, so a client can reconcile instead of paying again.
    if (outcome.kind !== "settled") return refuse(outcome.response.errorReason, outcome.response);
    return paid(c, outcome.response);
  });
  return app;
}

function paid(c: Context<AppEnv>, settlement: SettleResponse): Response {
  c.header("PAYMENT-RESPONSE", encodeHeader(settlement));
  c.header("Cache-Control", "no-store");
  return c.json({
    ok: true,
    message: "paid: this is the demo resource",
    transaction: settlement.transaction,
  });
}
