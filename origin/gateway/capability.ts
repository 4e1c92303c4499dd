import { type Capability, capability } from "../capability.ts";
import type { EventsHandlers } from "../events/capability.ts";
import type { RefusalCounter } from "../http/refusals.ts";
import type { Infrastructure } from "../infrastructure.ts";
import type { GatewayLimiters } from "./limits.ts";
import { createGatewayRouter, type GatewayWriteHandlers } from "./router.ts";

/**
 * The agent wallet API under {base}/agent/v1, behind bearer auth: the reads, and the write routes
 * the money and x402 capabilities hand it (a write whose handler is absent answers
 * `feature_disabled`).
 */
export function createGatewayModule(
  infra: Infrastructure,
  node: { limiters: GatewayLimiters; refusals: RefusalCounter },
  writes: GatewayWriteHandlers,
  events?: EventsHandlers,
): Capability {
  const router = createGatewayRouter(infra, {
    limiters: node.limiters,
    refusals: node.refusals,
    writes,
    events,
  });
  return capability("gateway", { routes: [{ path: "/agent/v1", router }] });
}
