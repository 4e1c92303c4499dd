/**
 * What `npm run policy -- show` prints: the agent's stored policy and budgets as GET
 * {base}/agent/v1/policy answers them (origin/policy/view.ts), the node's freeze, the agent's held
 * actions, and the enclave's own view of the agent's key (its version and what it counted), so an
 * operator sees at once whether the two agree. One JSON document with --json, lines otherwise.
 */
import type { AgentPolicyStatus } from "../../origin/signer/types.ts";
import type { PolicyResponse } from "../../shared/policy-schemas.ts";
import type { HeldActionRow } from "./policy-holds.ts";

export type PolicyShowJson = PolicyResponse & {
  agent_id: string;
  held: Array<{
    action_id: string;
    kind: string;
    amount: string | null;
    to: string | null;
    rule: string | null;
    expires_at: string | null;
  }>;
  enclave: {
    policy: AgentPolicyStatus["policy"];
    version: number;
    node_frozen: boolean;
    usage: {
      day: string;
      month: string;
      transfers: { day_units: string; month_units: string; day_count: number };
      x402: { day_units: string; day_count: number; payees: Record<string, string> };
    };
  };
};

export function policyShowJson(
  agentId: string,
  view: PolicyResponse,
  held: readonly HeldActionRow[],
  enclave: AgentPolicyStatus,
): PolicyShowJson {
  const { usage } = enclave;
  return {
    agent_id: agentId,
    ...view,
    held: held.map((action) => ({
      action_id: action.actionId,
      kind: action.kind,
      amount: action.amountUnits,
      to: action.to,
      rule: action.rule,
      expires_at: action.expiresAt?.toISOString() ?? null,
    })),
    enclave: {
      policy: enclave.policy,
      version: enclave.version,
      node_frozen: enclave.nodeFrozen,
      usage: {
        day: usage.day,
        month: usage.month,
        transfers: {
          day_units: usage.transfers.dayUnits.toString(),
          month_units: usage.transfers.monthUnits.toString(),
          day_count: usage.transfers.dayCount,
        },
        x402: {
          day_units: usage.x402.dayUnits.toString(),
          day_count: usage.x402.dayCount,
          payees: Object.fromEntries(
            Object.entries(usage.x402.payees).map(([payTo, units]) => [payTo, units.toString()]),
          ),
        },
      },
    },
  };
}

/** The same as lines for a person. */
export function formatPolicyShow(shown: PolicyShowJson): string {
  const lines: string[] = [`agent        ${shown.agent_id}`];
  lines.push(
    shown.policy === null
      ? "policy       none (the node's limits only)"
      : `policy       version ${shown.version} ${JSON.stringify(shown.policy)}`,
  );
  lines.push(
    `node         ${shown.node_frozen ? "FROZEN (every agent's money requests are refused)" : "not frozen"}`,
  );
  for (const budget of shown.budgets) {
    lines.push(
      `budget       ${budget.rule}: used ${budget.used} of ${budget.limit}, ${budget.remaining} left, resets ${budget.resets_at}`,
    );
  }
  if (shown.held.length === 0) lines.push("held         none");
  for (const action of shown.held) {
    lines.push(
      `held         ${action.action_id} ${action.kind} ${action.amount ?? "?"} units to ${action.to ?? "?"} (rule ${action.rule ?? "?"}, expires ${action.expires_at ?? "?"})`,
    );
  }
  const { enclave } = shown;
  // A row is stored only after the enclave sealed it: a difference is a change sealed, then lost.
  const agrees =
    shown.policy === null
      ? enclave.policy === null
      : enclave.policy !== null && enclave.version === shown.version;
  lines.push(
    `enclave      ${enclave.policy === null ? "no policy" : `version ${enclave.version}`}${agrees ? "" : " (not what the database holds: a change was sealed but not stored; set the policy again)"}, node ${enclave.node_frozen ? "frozen" : "not frozen"}`,
  );
  const { transfers, x402 } = enclave.usage;
  lines.push(
    `enclave      transfers ${transfers.day_units} units in ${transfers.day_count} today (${enclave.usage.day}), ${transfers.month_units} units this month (${enclave.usage.month})`,
  );
  lines.push(`enclave      x402 ${x402.day_units} units in ${x402.day_count} today`);
  return `${lines.join("\n")}\n`;
}
