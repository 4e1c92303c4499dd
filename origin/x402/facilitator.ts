/**
 * The public facilitator (docs/x402.md#the-demo-and-the-facilitator): `GET supported`, `POST
 * verify`, `POST settle` in the reference shapes that `@x402/core`'s HTTPFacilitatorClient reads.
 * It is the same verify and settle code the demo uses. Failures are data with HTTP 200, as the
 * reference facilitator answers them; a body that is not JSON is 400. The body's own `x402Version`
 * must be 2, as the envelope's must: a body of another version (or none) is of a protocol this
 * facilitator does not speak, whatever its payload says.
 *
 * Each request is counted for what it is (client-limit.ts): one the pure checks refuse against its
 * client's address, a signed payment against its payer and its address's payment budget; past
 * either, 429 `rate_limited` with Retry-After, in the same shapes. A payer or address that has
 * made as many settlements revert as it may is refused 429 `invalid_exact_evm_too_many_reverts`
 * (revert-guard.ts), and a settle holds a slot of both while it runs.
 */
import { type Context, Hono } from "hono";
import { CAIP2_NETWORK } from "../../shared/constants.ts";
import { err, ok } from "../../shared/result.ts";
import type { AppEnv } from "../http/env.ts";
import { bodyIncompleteError, readBodyLimited } from "../http/read-body.ts";
import { route } from "../openapi/route.ts";
import type { X402Limits } from "./client-limit.ts";
import { type Parsed, type PaymentEnvelope, parseEnvelope } from "./payment.ts";
import { X402_REASONS, type X402Reason } from "./reasons.ts";
import { X402_VERSION } from "./requirements.ts";
import { guardReason, type RevertGuard } from "./revert-guard.ts";
import type { SettleResponse } from "./settle.ts";
import { settledOutcome } from "./settled-outcome.ts";
import type { X402Runtime } from "./setup.ts";
import { checkContext, checkPayment, compareRequirements, type VerifyDeps, verifyFacts } from "./verify.ts";

type VerifyResponse = { isValid: boolean; invalidReason?: string; payer?: string };

export type FacilitatorRouterDeps = {
  runtime: X402Runtime;
  verifyDeps: VerifyDeps;
  limits: X402Limits;
  guard: RevertGuard;
};

/** A payment the pure checks passed, with its envelope (the settle needs its raw parts). */
type CheckedRequest = {
  payer: string;
  envelope: PaymentEnvelope;
  authorization: PaymentEnvelope["authorization"];
};

export function createFacilitatorRouter({
  runtime,
  verifyDeps,
  limits,
  guard,
}: FacilitatorRouterDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  route(app, "/x402/facilitator", "x402Supported", (c) =>
    c.json({
      kinds: [
        {
          x402Version: X402_VERSION,
          scheme: runtime.requirements.scheme,
          network: runtime.requirements.network,
          extra: runtime.requirements.extra,
        },
      ],
      extensions: [],
      signers: { "eip155:*": [runtime.settlerAddress] },
    }),
  );

  /**
   * Parses `{x402Version, paymentPayload, paymentRequirements}` and runs the checks that need
   * neither the chain nor the database (verify.ts checkPayment).
   */
  const check = (body: unknown): Parsed<CheckedRequest> => {
    const request = fieldsOf(body);
    const envelope = parseEnvelope(request.paymentPayload);
    if (!envelope.ok) return envelope;
    const payer = envelope.value.authorization.from;
    if (request.x402Version !== X402_VERSION) return err({ reason: X402_REASONS.invalidX402Version, payer });
    const given = request.paymentRequirements;
    if (typeof given !== "object" || given === null) {
      return err({ reason: X402_REASONS.invalidPaymentRequirements, payer });
    }
    const differs = compareRequirements(given as Record<string, unknown>, runtime.requirements);
    if (differs) return err({ reason: differs, payer });
    const checked = checkPayment(envelope.value, runtime.requirements, checkContext(verifyDeps));
    if (!checked.ok) return checked;
    return ok({ ...checked.value, envelope: envelope.value });
  };

  /**
   * What a request comes to before the chain or the database is read: the checked payment, or the
   * answer (a refusal of the pure checks, counted against the address; a window that is full).
   */
  const admit = async (
    c: Context<AppEnv>,
    refuse: (reason: X402Reason, payer: string, status: 200 | 400 | 413 | 429) => Response,
  ): Promise<CheckedRequest | Response> => {
    const clientIp = c.get("clientIp");
    const refused = (reason: X402Reason, payer: string, status: 200 | 400 | 413): Response => {
      const wait = limits.refused(clientIp);
      if (wait === undefined) return refuse(reason, payer, status);
      c.header("Retry-After", String(wait));
      return refuse(X402_REASONS.rateLimited, payer, 429);
    };
    const body = await readFacilitatorBody(c);
    if (body === TOO_LARGE) return refused(X402_REASONS.invalidPayload, "", 413);
    if (body === undefined) return refused(X402_REASONS.invalidPayloadJson, "", 400);
    const checked = check(body);
    if (!checked.ok) return refused(checked.error.reason, checked.error.payer ?? "", 200);
    const wait = limits.payment(clientIp, checked.value.payer);
    if (wait !== undefined) {
      c.header("Retry-After", String(wait));
      return refuse(X402_REASONS.rateLimited, checked.value.payer, 429);
    }
    return checked.value;
  };

  route(app, "/x402/facilitator", "x402Verify", async (c) => {
    const refuse = (reason: X402Reason, payer: string, status: 200 | 400 | 413 | 429): Response => {
      const answer: VerifyResponse = { isValid: false, invalidReason: reason, ...(payer ? { payer } : {}) };
      return c.json(answer, status);
    };
    const admitted = await admit(c, refuse);
    if (admitted instanceof Response) return admitted;
    // A settle now would be refused: say so rather than that it would settle.
    const held = await guard.check(c.get("clientIp"), admitted.payer);
    if (held) {
      c.header("Retry-After", String(held.retryAfterSeconds));
      return refuse(guardReason(held), admitted.payer, 429);
    }
    const result = await verifyFacts(verifyDeps, admitted);
    const answer: VerifyResponse = result.ok
      ? { isValid: true, payer: result.value.payer }
      : {
          isValid: false,
          invalidReason: result.error.reason,
          ...(result.error.payer ? { payer: result.error.payer } : {}),
        };
    return c.json(answer);
  });

  route(app, "/x402/facilitator", "x402Settle", async (c) => {
    const refuse = (reason: X402Reason, payer: string, status: 200 | 400 | 413 | 429): Response =>
      c.json(failed(reason, payer), status);
    const admitted = await admit(c, refuse);
    if (admitted instanceof Response) return admitted;
    const slot = await guard.enter(c.get("clientIp"), admitted.payer);
    if (!slot.ok) {
      c.header("Retry-After", String(slot.error.retryAfterSeconds));
      return refuse(guardReason(slot.error), admitted.payer, 429);
    }
    // A repeat of a settle whose answer was lost is a duplicate: answered from the stored
    // settlement (its transaction), never signed again.
    const outcome = await settledOutcome(slot.value, () =>
      runtime.settler.settle({
        authorization: admitted.authorization,
        signature: admitted.envelope.signature,
        requirement: admitted.envelope.accepted,
        payload: admitted.envelope.raw.payload,
      }),
    );
    return c.json(outcome.response);
  });

  return app;
}

/** A request's fields; a JSON body that is no object (`null`, a number) has none, so its payload is missing. */
function fieldsOf(body: unknown): Record<string, unknown> {
  return (typeof body === "object" && body !== null ? body : {}) as Record<string, unknown>;
}

function failed(reason: string, payer: string): SettleResponse {
  return {
    success: false,
    errorReason: reason as SettleResponse["errorReason"],
    payer,
    transaction: "",
    network: CAIP2_NETWORK,
  };
}

/** A verify or settle body is a payment and its requirements: a few KiB. */
const MAX_BODY_BYTES = 64 * 1024;
const TOO_LARGE = Symbol("too large");

/**
 * The request's JSON, read no further than MAX_BODY_BYTES (an oversize or endless body is never
 * buffered whole); undefined when it is not JSON.
 */
async function readFacilitatorBody(c: Context): Promise<unknown> {
  const read = await readBodyLimited(c, MAX_BODY_BYTES);
  // A body that does not arrive in time is the server's 408, not a verdict on a payment.
  if (!read.ok && read.error === "incomplete") throw bodyIncompleteError();
  if (!read.ok) return TOO_LARGE;
  try {
    return JSON.parse(new TextDecoder().decode(read.value)) as unknown;
  } catch {
    return undefined;
  }
}
