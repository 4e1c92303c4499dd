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
 * (revert-guard.ts). With the enclave's payee key as payTo, every 402 carries a signed offer and the
 * 200's PAYMENT-RESPONSE a signed receipt naming the transaction (offer-receipt.ts). Through the
 * edge, the unpaid 402 says how long the edge may give it to every unpaid GET of the same URL
 * itself (X-svc-Quote-Reuse, edge-worker/quotes.ts).
 */
import type { Context } from "hono";
import { Hono } from "hono";
import { HEADER_QUOTE_REUSE } from "../../../shared/constants.ts";
import type { Hex } from "../../../shared/hex.ts";
import type { AppEnv } from "../../http/env.ts";
import { route } from "../../openapi/route.ts";
import { X402_REASONS, type X402Reason } from "../reasons.ts";
import type { X402Runtime } from "../setup.ts";
import type { Facilitator, Turned } from "./facilitator-core.ts";
import type { OfferReceipts } from "./offer-receipt.ts";
import { decodePaymentHeader } from "./payment.ts";
import { encodeHeader, paymentRequired, type ResourceInfo } from "./requirements.ts";
import type { PublicUrlOf, ResourceUrlOf } from "./resource-url.ts";
import { type SettleResponse, settlementStatusPath, withStatusPointer } from "./settle-answer.ts";

/** The demo's description, in its quote and in discovery (discovery.ts). */
export const DEMO_DESCRIPTION = "x402 demo resource: a paid JSON answer";

export type DemoRouterDeps = {
  runtime: X402Runtime;
  /** The in-process facilitator's core, which checks and settles the paid retry. */
  facilitator: Facilitator;
  /** The public URL the quote names, never the origin's own (resource-url.ts). */
  resourceUrlOf: ResourceUrlOf;
  /** The public URL of a settlement's status, for a pending answer. */
  publicUrlOf: PublicUrlOf;
  /** Undefined when payTo is not the enclave's payee key: no offers, no receipts. */
  offerReceipts?: OfferReceipts;
  /** Whether this client may have the enclave sign one more offer now (client-limit.ts). */
  offerSigning: (clientIp: string) => boolean;
};

export function createDemoRouter({
  runtime,
  facilitator,
  resourceUrlOf,
  publicUrlOf,
  offerReceipts,
  offerSigning,
}: DemoRouterDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  route(app, "/x402/demo", "x402Demo", async (c) => {
    const resource: ResourceInfo = {
      url: resourceUrlOf(c),
      mimeType: "application/json",
      description: DEMO_DESCRIPTION,
    };
    /**
     * The 402: `reason` why a payment did not pay, `settlement` what its settle came to; neither for
     * a GET without a payment (`unpaid`), whose answer is the same for every caller for a while.
     */
    const refuse = async ({
      reason,
      settlement,
      unpaid = false,
    }: {
      reason?: X402Reason;
      settlement?: SettleResponse;
      unpaid?: boolean;
    }): Promise<Response> => {
      const quote = paymentRequired(resource, runtime.requirements, reason);
      const offers = await offerReceipts?.offersExtension(resource.url, () =>
        offerSigning(c.get("clientIp")),
      );
      if (offers) quote.extensions = { ...quote.extensions, ...offers.extension };
      c.header("PAYMENT-REQUIRED", encodeHeader(quote));
      if (settlement) c.header("PAYMENT-RESPONSE", encodeHeader(settlement));
      c.header("Cache-Control", "no-store");
      if (unpaid && c.get("viaEdge")) {
        const seconds = quoteReuseSeconds(offerReceipts !== undefined, offers?.servedForMs);
        if (seconds > 0) c.header(HEADER_QUOTE_REUSE, String(seconds));
      }
      return c.json(quote, 402);
    };
    const header = c.req.header("PAYMENT-SIGNATURE");
    if (header === undefined) return refuse({ unpaid: true });
    // A HEAD runs this route and has its body dropped: it could never deliver what a payment buys,
    // so its payment is not settled (nor counted) and it is answered the quote; the same payment
    // still buys a GET's answer.
    if (c.req.method === "HEAD") return refuse({});
    const clientIp = c.get("clientIp");
    const tooMany = (wait: number, reason: X402Reason): Response => {
      c.header("Retry-After", String(wait));
      c.header("Cache-Control", "no-store");
      return c.json(paymentRequired(resource, runtime.requirements, reason), 429);
    };
    // Turned away before settling: a 402 naming the reason, or a 429 with the wait past a window.
    const turnedAway = ({ reason, retryAfterSeconds }: Turned): Response | Promise<Response> =>
      retryAfterSeconds === undefined ? refuse({ reason }) : tooMany(retryAfterSeconds, reason);
    const decoded = decodePaymentHeader(header);
    // A paid retry the pure checks refuse counts against the client's address.
    if (!decoded.ok) return turnedAway(facilitator.refused(clientIp, decoded.error.code));
    const checked = facilitator.checkEnvelope(decoded.value, clientIp);
    if ("turned" in checked) return turnedAway(checked.turned);
    // What is paid for here is the demo, whatever resource the envelope names (the payer's word,
    // not signed): a payment id binds to it, so an id another seller's sale settled buys nothing here.
    const settled = await facilitator.settleChecked(
      { ...checked, envelope: { ...checked.envelope, resource: { url: resource.url } } },
      clientIp,
    );
    if ("turned" in settled) return turnedAway(settled.turned);
    // The payment id names another request of this payer's (docs/x402.md#payment-identifiers).
    if ("conflict" in settled) {
      c.header("Cache-Control", "no-store");
      return c.json(
        paymentRequired(resource, runtime.requirements, X402_REASONS.paymentIdentifierConflict),
        409,
      );
    }
    const { outcome } = settled;
    // Every settle that did not pay reports its outcome in PAYMENT-RESPONSE
    // (docs/api.md#the-demos-paid-retry-when-payment-response-is-sent):
    // refused on the chain's facts (balance, nonce; no transaction), pending or failed, or a
    // payment presented again (`duplicate`), which names the original transaction, settled or
    // pending, so a client can reconcile instead of paying again.
    // A pending one also says where its outcome will be told (settle-answer.ts withStatusPointer).
    if (outcome.kind !== "settled") {
      const statusUrl = publicUrlOf(c, settlementStatusPath(checked.payer, settled.nonce));
      return refuse({
        reason: outcome.response.errorReason,
        settlement: withStatusPointer(outcome.response, statusUrl),
      });
    }
    const receipt = await offerReceipts?.receiptExtension({
      resourceUrl: resource.url,
      payer: outcome.response.payer,
      network: outcome.response.network,
      transaction: outcome.response.transaction,
    });
    // A settled presentation took the payment's one paid answer. A payer that left before it is
    // written (a client's timeout while the settlement was mined, while its retry waited for a
    // pending one, or while the receipt was signed, which can take the signer client's whole wait)
    // reads nothing: the answer is given back, owed to its retry of the same payment. A payer
    // that leaves while the answer is written cannot be told from one that read it.
    if (c.req.raw.signal.aborted) {
      await facilitator.returnPaidAnswer({ from: checked.authorization.from, nonce: settled.nonce as Hex });
      // Answered as pending, which nobody reads: no offer is signed for it.
      c.header("Cache-Control", "no-store");
      return c.json(paymentRequired(resource, runtime.requirements, X402_REASONS.settlementPending), 402);
    }
    return paid(c, receipt ? { ...outcome.response, extensions: receipt } : outcome.response);
  });
  return app;
}

/** The longest the edge gives the unpaid quote itself (edge-worker/quotes.ts). */
export const QUOTE_REUSE_AT_MOST_SECONDS = 30;

/**
 * How long the edge may give this unpaid 402 to every unpaid GET of its URL: while its offer is
 * still the one served (none if the offer could not be signed, so the next GET asks again), and
 * QUOTE_REUSE_AT_MOST_SECONDS at most, which is also how soon a node's changed terms reach payers
 * through the edge.
 */
function quoteReuseSeconds(signsOffers: boolean, offerServedForMs: number | undefined): number {
  if (!signsOffers) return QUOTE_REUSE_AT_MOST_SECONDS;
  if (offerServedForMs === undefined) return 0;
  return Math.min(QUOTE_REUSE_AT_MOST_SECONDS, Math.floor(offerServedForMs / 1000));
}

function paid(
  c: Context<AppEnv>,
  settlement: SettleResponse & { extensions?: Record<string, unknown> },
): Response {
  c.header("PAYMENT-RESPONSE", encodeHeader(settlement));
  c.header("Cache-Control", "no-store");
  return c.json({
    ok: true,
    message: "paid: this is the demo resource",
    transaction: settlement.transaction,
  });
}
