/**
 * `GET {base}/x402/demo` (docs/x402.md#the-demo-and-the-facilitator): unpaid, a 402 with the quote
 * in the body and, Base64, in PAYMENT-REQUIRED; paid (PAYMENT-SIGNATURE), decode, check and settle
 * through the in-process facilitator (the settle batch reads the payment's facts on chain, the last
 * checks of verify, while it claims the payment), and 200 with PAYMENT-RESPONSE only once the
 * settler transaction's receipt is 0x1. Every failure is a 402 whose `error` names the reason;
 * after a settle (refused on the chain's facts, pending, failed, or an earlier presentation)
 * PAYMENT-RESPONSE carries its outcome, naming the original transaction if any. A paid retry is
 * counted for what it is (client-limit.ts): one the pure checks refuse against its client's
 * address, a signed payment against its payer and its address's payment budget; past either, 429
 * with the quote, `error` rate_limited, and Retry-After. A payer or address that has made as many
 * settlements revert as it may is refused the same way with `invalid_exact_evm_too_many_reverts`
 * (revert-guard.ts).
 */
import type { Context } from "hono";
import { Hono } from "hono";
import type { AppEnv } from "../http/env.ts";
import { route } from "../openapi/route.ts";
import type { X402Limits } from "./client-limit.ts";
import { decodePaymentHeader } from "./payment.ts";
import { X402_REASONS, type X402Reason } from "./reasons.ts";
import { encodeHeader, paymentRequired, type ResourceInfo } from "./requirements.ts";
import type { ResourceUrlOf } from "./resource-url.ts";
import { guardReason, type RevertGuard } from "./revert-guard.ts";
import type { SettleResponse } from "./settle.ts";
import { settledOutcome } from "./settled-outcome.ts";
import type { X402Runtime } from "./setup.ts";
import { checkContext, checkPayment, type VerifyDeps } from "./verify.ts";

export type DemoRouterDeps = {
  runtime: X402Runtime;
  verifyDeps: VerifyDeps;
  limits: X402Limits;
  guard: RevertGuard;
  /** The public URL the quote names, never the origin's own (resource-url.ts). */
  resourceUrlOf: ResourceUrlOf;
};

export function createDemoRouter({
  runtime,
  verifyDeps,
  limits,
  guard,
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
    const clientIp = c.get("clientIp");
    const tooMany = (wait: number, reason: X402Reason): Response => {
      c.header("Retry-After", String(wait));
      c.header("Cache-Control", "no-store");
      return c.json(paymentRequired(resource, runtime.requirements, reason), 429);
    };
    // A paid retry the pure checks refuse counts against the client's address.
    const refused = (reason: X402Reason): Response => {
      const wait = limits.refused(clientIp);
      return wait === undefined ? refuse(reason) : tooMany(wait, X402_REASONS.rateLimited);
    };
    const decoded = decodePaymentHeader(header);
    if (!decoded.ok) return refused(decoded.error.reason);
    const envelope = decoded.value;
    const checked = checkPayment(envelope, runtime.requirements, checkContext(verifyDeps));
    if (!checked.ok) return refused(checked.error.reason);
    // A signed payment reads the chain and may settle: it counts against its payer and its address.
    const { payer, authorization } = checked.value;
    const wait = limits.payment(clientIp, payer);
    if (wait !== undefined) return tooMany(wait, X402_REASONS.rateLimited);
    const slot = await guard.enter(clientIp, payer);
    if (!slot.ok) return tooMany(slot.error.retryAfterSeconds, guardReason(slot.error));
    const outcome = await settledOutcome(slot.value, () =>
      runtime.settler.settle({
        authorization,
        signature: envelope.signature,
        requirement: envelope.accepted,
        payload: envelope.raw.payload,
      }),
    );
    // Every settle that did not pay reports its outcome in PAYMENT-RESPONSE
    // (docs/api.md#the-demos-paid-retry-when-payment-response-is-sent):
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
