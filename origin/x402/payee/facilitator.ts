/**
 * The public facilitator's routes (docs/x402.md#the-demo-and-the-facilitator): `GET supported`,
 * `POST verify`, `POST settle` in the reference shapes that `@x402/core`'s HTTPFacilitatorClient
 * reads. What each answers is the framework-free core's (facilitator-core.ts), the same the demo
 * settles through; a route only reads the body and writes the answer, with Retry-After on a 429,
 * and a `settlement_pending` with the public URL of its settlement's status.
 */
import { type Context, Hono } from "hono";
import { MAX_JSON_DEPTH, nestsAtMost } from "../../../shared/json-depth.ts";
import type { AppEnv } from "../../http/env.ts";
import { bodyIncompleteError, readBodyLimited } from "../../http/read-body.ts";
import { route } from "../../openapi/route.ts";
import type { Facilitator, FacilitatorAnswer, FacilitatorBody } from "./facilitator-core.ts";
import type { PublicUrlOf } from "./resource-url.ts";
import { withStatusPointer } from "./settle-answer.ts";

/** The facilitator's routes: each reads its body and writes what the core (facilitator-core.ts) answers. */
export function createFacilitatorRouter(facilitator: Facilitator, publicUrlOf: PublicUrlOf): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  route(app, "/x402/facilitator", "x402Supported", (c) => c.json(facilitator.supported()));
  route(app, "/x402/facilitator", "x402Verify", async (c) =>
    answer(c, await facilitator.verify(await readFacilitatorBody(c), c.get("clientIp"))),
  );
  route(app, "/x402/facilitator", "x402Settle", async (c) => {
    const settled = await facilitator.settle(await readFacilitatorBody(c), c.get("clientIp"));
    // A settle answered as paid took its payment's one paid answer. A seller that left before it
    // is written (its client's timeout while the settlement was mined) reads nothing: the answer is
    // given back, owed to the next settle of the same payment, as the demo gives back its own
    // (demo.ts). One that leaves while it is written cannot be told from one that read it.
    if (settled.paidAnswer && c.req.raw.signal.aborted)
      await facilitator.returnPaidAnswer(settled.paidAnswer);
    const { statusPath } = settled;
    return answer(
      c,
      statusPath === undefined
        ? settled
        : { ...settled, body: withStatusPointer(settled.body, publicUrlOf(c, statusPath)) },
    );
  });
  return app;
}

function answer<Body>(
  c: Context<AppEnv>,
  { status, body, retryAfterSeconds }: FacilitatorAnswer<Body>,
): Response {
  if (retryAfterSeconds !== undefined) c.header("Retry-After", String(retryAfterSeconds));
  return c.json(body as object, status);
}

/** A verify or settle body is a payment and its requirements: a few KiB. */
const MAX_BODY_BYTES = 64 * 1024;

/**
 * The request's JSON, read no further than MAX_BODY_BYTES (an oversize or endless body is never
 * buffered whole) and nested no deeper than MAX_JSON_DEPTH: a payment's requirement and payload are
 * hashed by a recursive walk (canonical-json.ts), which a body nested thousands deep overflows.
 */
async function readFacilitatorBody(c: Context): Promise<FacilitatorBody> {
  const read = await readBodyLimited(c, MAX_BODY_BYTES);
  // A body that does not arrive in time is the server's 408, not a verdict on a payment.
  if (!read.ok && read.error === "incomplete") throw bodyIncompleteError();
  if (!read.ok) return "too_large";
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder().decode(read.value));
  } catch {
    return "not_json";
  }
  return nestsAtMost(json, MAX_JSON_DEPTH) ? { json } : "too_deep";
}
