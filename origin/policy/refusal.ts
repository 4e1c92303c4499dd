/**
 * What an agent is told when its spending policy refuses a request (docs/agents.md#your-spending-policy):
 * 403 `policy_denied`, naming the rule and what remains under it. One shape for transfers, x402
 * authorizations and the check route's "deny".
 */
import type { Refusal } from "../agent-actions/refusal.ts";

const WHY: Record<string, string> = {
  "node.frozen": "an operator froze every agent of this node",
  frozen: "this agent's policy is frozen",
  "transfers.deny": "the recipient is on the policy's deny list",
  "transfers.allow": "the recipient is not on the policy's allow list",
  "x402.payees": "the payee is not one the policy lists",
};

export function policyDenied(decision: { rule: string; remaining: string | null }): Refusal {
  const { rule, remaining } = decision;
  const why = WHY[rule] ?? `over the policy's ${rule} (${remaining} remaining)`;
  return {
    code: "policy_denied",
    message: `the agent's spending policy refuses this request: ${why}; nothing was signed`,
    fields: { rule, remaining: remaining ?? "0" },
  };
}
