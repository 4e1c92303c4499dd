import type { GatewayLimiters } from "../gateway/limits.ts";
import type { RefusalCounter } from "../http/refusals.ts";
import type { OriginMetrics } from "../metrics/metrics.ts";
import type { EarlyLimiter } from "../registration/early-limiter.ts";

/**
 * What one app instance keeps in memory and shares between its routers (origin/app.ts builds
 * it): the gateway's limiters and the registration's early limiter, which the console shows as
 * this node's buckets, and the metrics, which every limiter reports its refusals to. Per node,
 * reset on restart (docs/operations.md#the-operator-console-and-metrics).
 */
export type NodeLocal = {
  limiters: GatewayLimiters;
  earlyLimiter: EarlyLimiter;
  refusals: RefusalCounter;
  metrics: OriginMetrics;
  startedAt: Date;
};
