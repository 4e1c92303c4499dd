/**
 * The x402 module: its entry (createX402Module), in two rooms that never import each other
 * (.dependency-cruiser.cjs, x402-room-imports-other-room); both may import the files at this root.
 *  - payer/: what an agent uses to pay, `POST /agent/v1/x402/authorize`
 *    (docs/x402.md#an-agent-pays-with-its-token-authorize): the quote entry it may authorize, the
 *    envelope the enclave signs for it, the one stored signature and the daily count.
 *  - payee/: what gets paid and settles, the demo and the facilitator
 *    (docs/x402.md#the-demo-and-the-facilitator): the quote, the payment's parse and verification,
 *    the client windows and the revert guard, settlement (the outbox kind, reservations, follower).
 *  - here: the wiring (this file, router.ts, setup.ts) and what is shared: canonical-json.ts (both
 *    rooms) and reasons.ts (the x402 wire reasons, which tests and the fuzz tables import too).
 */
import type { Handler } from "hono";
import { type Capability, capability } from "../capability.ts";
import type { AppEnv } from "../http/env.ts";
import type { RefusalCounter } from "../http/refusals.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { x402AuthorizeHandler } from "./payer/authorize.ts";
import { createX402PolicyDecision, type X402PolicyDecision } from "./payer/policy-decision.ts";
import { createX402Router } from "./router.ts";
import type { X402Runtime } from "./setup.ts";

export type X402Module = {
  capability: Capability;
  /** The gateway's authorize route, when the switch is on; the gateway mounts it. */
  writes: { x402Authorize?: Handler<AppEnv> };
  /**
   * The policy check call's x402 half (origin/policy/routes.ts takes it): what authorize would
   * decide of a quote, reserving nothing. Undefined when authorize is off.
   */
  x402PolicyDecision?: X402PolicyDecision;
};

/**
 * The x402 demo resource and facilitator under {base}/x402 (present when x402 is on and its
 * runtime was built from the sealed policy, see startup/money-setup.ts), and the gateway's
 * authorize route. Authorize stands apart from the money routes: turning transfers off does not
 * turn x402 off (docs/api.md#x402-stands-apart-from-transfers); config requires the amount and
 * payTo when the switch is on.
 */
export function createX402Module(
  infra: Infrastructure,
  refusals: RefusalCounter,
  runtime: X402Runtime | undefined,
): X402Module {
  const router = createX402Router(infra, runtime, { refusals });
  const { amountUnits, payTo, maxTimeoutSeconds, dailyLimit, validityMarginSeconds } = infra.config.x402;
  const capabilityOf = capability("x402", { routes: router ? [{ path: "/x402", router }] : [] });
  if (!infra.config.features.x402 || amountUnits === undefined || !payTo) {
    return { capability: capabilityOf, writes: {} };
  }
  const pair = { amountUnits, payTo: payTo.toLowerCase(), maxTimeoutSeconds, validityMarginSeconds };
  // The ceiling as sealed at start (setup.ts); without a runtime, the pair alone.
  const ceiling = runtime?.ceiling ?? null;
  return {
    capability: capabilityOf,
    writes: {
      x402Authorize: x402AuthorizeHandler({
        db: infra.database.db,
        signer: infra.signer,
        clock: infra.clock,
        policy: pair,
        ceiling,
        dailyLimit,
        validityMarginSeconds,
        decided: (decision) => infra.metrics.policyDecided("x402", decision),
      }),
    },
    x402PolicyDecision: createX402PolicyDecision({ pair, ceiling }, dailyLimit),
  };
}
