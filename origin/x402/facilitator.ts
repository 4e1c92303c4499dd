/**
 * The public facilitator (SPEC "x402 surfaces"; docs/x402.md): `GET supported`, `POST verify`,
 * `POST settle` in the reference shapes that `@x402/core`'s HTTPFacilitatorClient reads. It is the
 * same verify and settle code the demo uses. Failures are data with HTTP 200, as the reference
 * facilitator answers them; a body that is not JSON is 400; a client past its window
 * (client-limit.ts) is 429 with Retry-After, in the same shapes. The body's own `x402Version`
 * must be 2, as the envelope's must: a body of another version (or none) is of a protocol this
 * facilitator does not speak, whatever its payload says.
 */
import { type Context, Hono } from "hono";
import { CAIP2_NETWORK } from "../../shared/constants.ts";
import { err } from "../../shared/result.ts";
import type { AppEnv } from "../http/env.ts";
import { bodyIncompleteError, readBodyLimited } from "../http/read-body.ts";
import { route } from "../openapi/route.ts";
import type { ClientLimit } from "./client-limit.ts";
import { parseEnvelope } from "./payment.ts";
import { X402_REASONS } from "./reasons.ts";
import { X402_VERSION } from "./requirements.ts";
import type { SettleResponse } from "./settle.ts";
import type { X402Runtime } from "./setup.ts";
import {
  checkContext,
  checkPayment,
  compareRequirements,
  type VerifyDeps,
  type VerifyResult,
  verifyPayment,
} from "./verify.ts";

type VerifyResponse = { isValid: boolean; invalidReason?: string; payer?: string };

export function createFacilitatorRouter(
  runtime: X402Runtime,
  verifyDeps: VerifyDeps,
  limit: ClientLimit,
): Hono<AppEnv> {
  const app = new Hono<AppEnv>();

  /** Retry-After set when the client's window is full (client-limit.ts), before the body is read. */
  const overLimit = (c: Context<AppEnv>): boolean => {
    const wait = limit(c.get("clientIp"));
    if (wait === undefined) return false;
    c.header("Retry-After", String(wait));
    return true;
  };

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
   * Parses `{x402Version, paymentPayload, paymentRequirements}` and checks it: all of verify, or
   * (to settle) the pure checks, the settle batch reading the rest while it claims the payment.
   */
  const check = async (
    body: unknown,
    depth: "verify" | "settle",
  ): Promise<{ result: VerifyResult; envelope?: ReturnType<typeof parseEnvelope> }> => {
    const request = fieldsOf(body);
    const envelope = parseEnvelope(request.paymentPayload);
    if (!envelope.ok) return { result: envelope };
    if (request.x402Version !== X402_VERSION) {
      return {
        result: err({ reason: X402_REASONS.invalidX402Version, payer: envelope.value.authorization.from }),
      };
    }
    const given = request.paymentRequirements;
    if (typeof given !== "object" || given === null) {
      return {
        result: err({
          reason: X402_REASONS.invalidPaymentRequirements,
          payer: envelope.value.authorization.from,
        }),
      };
    }
    const differs = compareRequirements(given as Record<string, unknown>, runtime.requirements);
    if (differs) return { result: err({ reason: differs, payer: envelope.value.authorization.from }) };
    return {
      result:
        depth === "verify"
          ? await verifyPayment(verifyDeps, envelope.value, runtime.requirements)
          : checkPayment(envelope.value, runtime.requirements, checkContext(verifyDeps)),
      envelope,
    };
  };

  route(app, "/x402/facilitator", "x402Verify", async (c) => {
    if (overLimit(c)) return c.json({ isValid: false, invalidReason: X402_REASONS.rateLimited }, 429);
    const body = await readFacilitatorBody(c);
    if (body === TOO_LARGE)
      return c.json({ isValid: false, invalidReason: X402_REASONS.invalidPayload }, 413);
    if (body === undefined)
      return c.json({ isValid: false, invalidReason: X402_REASONS.invalidPayloadJson }, 400);
    const { result } = await check(body, "verify");
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
    if (overLimit(c)) return c.json(failed(X402_REASONS.rateLimited, ""), 429);
    const body = await readFacilitatorBody(c);
    if (body === TOO_LARGE) return c.json(failed(X402_REASONS.invalidPayload, ""), 413);
    if (body === undefined) {
      return c.json(failed(X402_REASONS.invalidPayloadJson, ""), 400);
    }
    const { result, envelope } = await check(body, "settle");
    if (!result.ok) return c.json(failed(result.error.reason, result.error.payer ?? ""));
    if (!envelope?.ok) return c.json(failed(X402_REASONS.invalidPayload, result.value.payer));
    // A repeat of a settle whose answer was lost is a duplicate: answered from the stored
    // settlement (its transaction), never signed again.
    const outcome = await runtime.settler.settle({
      authorization: result.value.authorization,
      signature: envelope.value.signature,
      requirement: envelope.value.accepted,
      payload: envelope.value.raw.payload,
    });
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
