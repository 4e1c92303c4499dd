import { randomBytes } from "node:crypto";
import type { Handler } from "hono";
import type { RegistrationOverview } from "../../shared/console-schemas.ts";
import type { LimiterBucket } from "../../shared/rate-limiter.ts";
import type { AppEnv } from "../http/env.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { hashIpGroup } from "../registration/ip-classification.ts";
import { REGISTRATION_SETTINGS } from "../registration/settings.ts";
import type { NodeLocal } from "./node-local.ts";
import { readPersistentRegistration } from "./queries.ts";

/** The console shows up to 200 API buckets over 60 seconds (docs/api.md#the-operator-console). */
export const MAX_LOCAL_BUCKETS = 200;

const SETTING_RANGES = Object.fromEntries(
  Object.entries(REGISTRATION_SETTINGS).map(([name, rule]) => [
    name,
    rule.kind === "integer" ? { kind: rule.kind, max: rule.max } : { kind: rule.kind },
  ]),
) as RegistrationOverview["setting_ranges"];

/**
 * GET {base}/admin/agents/registration (docs/operations.md#the-operator-console-and-metrics): the
 * persistent issuance and admission counters, verified-key stock, the policy and quotas, the last
 * 50 public identities, the hashed IP groups, and this node's limiter buckets of the last 60 s.
 * Read only.
 */
export function registrationOverviewHandler(deps: Infrastructure, node: NodeLocal): Handler<AppEnv> {
  const displayIpGroup = ipGroupDisplay(deps.config.secrets.registrationIp);
  return async (c) => {
    const now = deps.clock.now();
    const persistent = await readPersistentRegistration(deps.database.db, now);
    const body: RegistrationOverview = {
      generated_at: now.toISOString(),
      ...persistent,
      setting_ranges: SETTING_RANGES,
      local_buckets: {
        scope: "node",
        reset_on_restart: true,
        window_seconds: 60,
        node_started_at: node.startedAt.toISOString(),
        buckets: localBuckets(node, displayIpGroup),
      },
    };
    c.header("Cache-Control", "no-store");
    return c.json(body);
  };
}

type Bucket = RegistrationOverview["local_buckets"]["buckets"][number];

/** The three in-memory tiers of this node, most recently active first, at most 200 in all. */
function localBuckets(node: NodeLocal, displayIpGroup: (group: string) => string): Bucket[] {
  const tagged: (LimiterBucket & { tier: Bucket["tier"] })[] = [
    ...node.limiters.failuresPerIp
      .snapshot(MAX_LOCAL_BUCKETS)
      .map((bucket) => ({ ...bucket, tier: "pre_auth_ip" as const, key: displayIpGroup(bucket.key) })),
    ...node.limiters.requestsPerAgent
      .snapshot(MAX_LOCAL_BUCKETS)
      .map((bucket) => ({ ...bucket, tier: "per_agent" as const })),
    // Its keys are hashed groups already, and `*` for the node-wide window.
    ...node.earlyLimiter
      .snapshot(MAX_LOCAL_BUCKETS)
      .map((bucket) => ({ ...bucket, tier: "registration_early" as const })),
  ];
  return tagged
    .sort((a, b) => b.lastSecond - a.lastSecond)
    .slice(0, MAX_LOCAL_BUCKETS)
    .map(({ tier, key, count }) => ({ tier, key, count }));
}

/**
 * The console shows no client address: a per-IP bucket is shown as its group's HMAC, the same
 * one registration stores when AGENT_REGISTRATION_IP_SECRET is set (so an operator can match
 * the two), otherwise under a random key of this process.
 */
function ipGroupDisplay(secret: string | undefined): (group: string) => string {
  const key = secret ?? randomBytes(32).toString("hex");
  return (group) => hashIpGroup(key, group);
}
