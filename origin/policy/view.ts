/**
 * The agent's policy as GET /agent/v1/policy answers it: the document, and each budget with its
 * limit, what its window used, what remains and when the window resets (UTC day or month).
 */
import type { AgentPolicy, PolicyUsage } from "../../shared/agent-policy.ts";
import type { PolicyResponse } from "../../shared/policy-schemas.ts";
import { startOfUtcDay } from "../agent-actions/utc-day.ts";
import type { PolicyState } from "./store.ts";

type Budget = PolicyResponse["budgets"][number];

export function policyView(state: PolicyState, now: Date): PolicyResponse {
  return {
    policy: state.stored?.document ?? null,
    version: state.stored?.version ?? null,
    node_frozen: state.nodeFrozen,
    budgets: state.stored ? budgets(state.stored.policy, state.usage, now) : [],
  };
}

function budgets(policy: AgentPolicy, usage: PolicyUsage, now: Date): Budget[] {
  const dayEnds = new Date(startOfUtcDay(now).getTime() + 86_400_000).toISOString();
  const monthEnds = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString();
  const list: Budget[] = [];
  const add = (rule: string, limit: bigint | number | null, used: bigint | number, resetsAt: string) => {
    if (limit === null) return;
    const [cap, spent] = [BigInt(limit), BigInt(used)];
    list.push({
      rule,
      limit: cap.toString(),
      used: spent.toString(),
      remaining: (cap > spent ? cap - spent : 0n).toString(),
      resets_at: resetsAt,
    });
  };
  const { transfers, x402 } = policy;
  add("transfers.daily_units", transfers.dailyUnits, usage.transfers.dayUnits, dayEnds);
  add("transfers.monthly_units", transfers.monthlyUnits, usage.transfers.monthUnits, monthEnds);
  add("transfers.daily_count", transfers.dailyCount, usage.transfers.dayCount, dayEnds);
  add("x402.daily_units", x402.dailyUnits, usage.x402.dayUnits, dayEnds);
  add("x402.daily_count", x402.dailyCount, usage.x402.dayCount, dayEnds);
  for (const payee of x402.payees ?? []) {
    const used = usage.x402.payeeDayUnits.get(payee.payTo) ?? 0n;
    add(`x402.payees[${payee.payTo}].daily_units`, payee.dailyUnits, used, dayEnds);
  }
  return list;
}
