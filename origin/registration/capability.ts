import { type Capability, capability } from "../capability.ts";
import type { RefusalCounter } from "../http/refusals.ts";
import type { Infrastructure } from "../infrastructure.ts";
import type { KeyDemand } from "../keypool/demand.ts";
import type { OriginMetrics } from "../metrics/metrics.ts";
import type { EarlyLimiter } from "./early-limiter.ts";
import { createRegistrationRouter } from "./router.ts";

/**
 * POST {base}/agent/v1/register: public (it needs no token:
 * docs/api.md#registration-what-a-request-must-be), so it is mounted before the gateway, whose `*`
 * middleware (client IP, bearer auth) would otherwise run first.
 */
export function createRegistrationModule(
  infra: Infrastructure,
  node: { earlyLimiter: EarlyLimiter; refusals: RefusalCounter; metrics: OriginMetrics },
  keyDemand: KeyDemand,
  options: { keyWaitMs?: number | undefined } = {},
): Capability {
  const router = createRegistrationRouter(infra, {
    earlyLimiter: node.earlyLimiter,
    refusals: node.refusals,
    registrationRefused: node.metrics.registrationRefused,
    keyDemand,
    keyWaitMs: options.keyWaitMs,
  });
  return capability("registration", { routes: [{ path: "/agent/v1/register", router }] });
}
