/**
 * The enclave's re-check of an agent key's own policy (shared/agent-policy.ts, the one evaluation
 * the gateway runs too) and of the node's freeze, on every signature of an agent key
 * (docs/enclave.md#agent-policies-operator-keys-and-approvals). A decision becomes `cap_exceeded`
 * with `policy_denied` or `policy_held` and the rule that decided. Approvals of held actions are
 * looked up here by their subject, and pruned once lapsed, so the set stays bounded.
 */
import type { AgentPolicy, PolicyDecision, PolicyUsage } from "../shared/agent-policy.ts";
import type { EnclaveFailure } from "../shared/enclave-protocol.ts";
import type { EnclaveState } from "./enclave-state.ts";

/** Approvals of held actions kept at once; an approve_held past it is refused. */
export const MAX_HELD_APPROVALS = 10_000;

/** Every agent key of a frozen node: nothing is signed that moves an agent's money. */
export const NODE_FROZEN: EnclaveFailure = {
  code: "cap_exceeded",
  reason: "the node is frozen",
  detail: "policy_denied",
  rule: "node.frozen",
};

/** A policy decision as the enclave answers it: null for allow. */
export function decisionRefusal(decision: PolicyDecision): EnclaveFailure | null {
  if (decision.decision === "allow") return null;
  if (decision.decision === "hold") {
    return {
      code: "cap_exceeded",
      reason: `held for an operator's approval (${decision.rule})`,
      detail: "policy_held",
      rule: decision.rule,
    };
  }
  return {
    code: "cap_exceeded",
    reason: `refused by the agent's policy (${decision.rule})`,
    detail: "policy_denied",
    rule: decision.rule,
  };
}

/**
 * A filler's fee against the agent's transfer budgets of the day and month (not its count: a
 * filler is no transfer). Never held, never frozen: it moves nothing, it unblocks what waits.
 */
export function fillerRefusal(policy: AgentPolicy, usage: PolicyUsage, units: bigint): EnclaveFailure | null {
  const { dailyUnits, monthlyUnits } = policy.transfers;
  const deny = (rule: string): EnclaveFailure => ({
    code: "cap_exceeded",
    reason: `refused by the agent's policy (${rule})`,
    detail: "policy_denied",
    rule,
  });
  if (dailyUnits !== null && usage.transfers.dayUnits + units > dailyUnits)
    return deny("transfers.daily_units");
  if (monthlyUnits !== null && usage.transfers.monthUnits + units > monthlyUnits)
    return deny("transfers.monthly_units");
  return null;
}

/** True when an approval of `subject` is held and has not lapsed at `nowMs`. */
export function approvalHeld(state: EnclaveState, subject: string, nowMs: number): boolean {
  const expiresAtMs = state.heldApprovals.get(subject);
  return expiresAtMs !== undefined && expiresAtMs > nowMs;
}

/** Forgets the approvals that lapsed by `nowMs` (they can approve nothing any more). */
export function pruneHeldApprovals(state: EnclaveState, nowMs: number): void {
  for (const [subject, expiresAtMs] of state.heldApprovals) {
    if (expiresAtMs <= nowMs) state.heldApprovals.delete(subject);
  }
}
