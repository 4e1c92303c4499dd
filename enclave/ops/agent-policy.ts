/**
 * set_agent_policy (admin tier) and get_agent_policy (no capability): an agent-transfer key's
 * spending policy, sealed per key (docs/enclave.md#agent-policies-operator-keys-and-approvals).
 * A change that only tightens (shared/agent-policy.ts loosenings is empty) is accepted under the
 * origin's admin capability alone; anything else needs an enrolled operator's approval of this
 * exact change, so a compromised origin can stop an agent but never let it spend more.
 */
import {
  type AgentPolicyDocument,
  agentPolicySchema,
  loosenings,
  NO_AGENT_POLICY,
  policyFromDocument,
  policyToDocument,
} from "../../shared/agent-policy.ts";
import { agentPolicySubject } from "../../shared/operator-approval.ts";
import { policyShown } from "../../shared/passkey-approval.ts";
import { err } from "../../shared/result.ts";
import { emptyUsage, usageOn } from "../agent-usage.ts";
import {
  type AcceptedApproval,
  acceptOperatorCounter,
  checkOperatorApproval,
  operatorRequired,
} from "../operator-approval-check.ts";
import { KEY_NOT_USABLE, refuse, succeed } from "../outcome.ts";
import { nodePayee, utcDay, utcMonth } from "../policy-checks.ts";
import type { OpHandler } from "./handler.ts";

export const setAgentPolicy: OpHandler<"set_agent_policy"> = async (ctx, params) => {
  const key = ctx.keystore.get(params.key_ref);
  if (key?.namespace !== "agent-transfer") return KEY_NOT_USABLE;
  let document: AgentPolicyDocument | null = null;
  if (params.policy !== null) {
    const parsed = agentPolicySchema.safeParse(params.policy);
    if (!parsed.success) return refuse("malformed", "the policy document does not parse");
    // Held as its normal form (what the subject an operator signs names too).
    document = policyToDocument(policyFromDocument(parsed.data));
  }
  const next = document === null ? null : policyFromDocument(document);
  const { state } = ctx.state;
  const current = state.agentPolicies.get(key.keyRef)?.policy ?? null;
  const node = state.policy ? nodePayee(state.policy) : null;
  const loosened = loosenings(current ?? NO_AGENT_POLICY, next ?? NO_AGENT_POLICY, node);
  if (loosened.length > 0 && !params.operator) return err(operatorRequired(loosened[0]!));
  const now = ctx.now();
  let accepted: AcceptedApproval | null = null;
  // An approval given where none is needed is checked all the same: never silently ignored.
  if (params.operator) {
    const sealedBefore = state.agentPolicies.get(key.keyRef)?.document ?? null;
    const checked = checkOperatorApproval(ctx.config, state, {
      op: "set_agent_policy",
      subject: agentPolicySubject(key.keyRef, document),
      // Both kinds of approval bind the policy before (the one sealed here now) and after, so one
      // held back while the agent froze or tightened its policy cannot undo that.
      policyBefore: agentPolicySubject(key.keyRef, sealedBefore),
      shown: policyShown(key.keyRef, sealedBefore, document),
      approval: params.operator,
      nowMs: now.getTime(),
    });
    if (!checked.ok) return checked;
    accepted = checked.value;
  }
  const day = utcDay(now);
  const month = utcMonth(now);
  let version = 0;
  // No await between the checks above and this change: a concurrent change sees it.
  await ctx.state.commit((sealed) => {
    if (accepted) acceptOperatorCounter(sealed, accepted);
    const before = sealed.agentPolicies.get(key.keyRef);
    version = (before?.version ?? 0) + 1;
    sealed.agentPolicies.set(key.keyRef, {
      document,
      policy: next,
      version,
      // Usage counts from when the key got its policy, and is kept across changes of it.
      usage: next !== null && before?.policy ? before.usage : emptyUsage(day, month),
    });
  });
  ctx.logger.info(
    { key_ref: key.keyRef, version, operator_key: accepted?.keyId ?? null },
    "agent policy set",
  );
  return succeed({ key_ref: key.keyRef, policy: document, version });
};

export const getAgentPolicy: OpHandler<"get_agent_policy"> = (ctx, params) => {
  const key = ctx.keystore.get(params.key_ref);
  if (key?.namespace !== "agent-transfer") return KEY_NOT_USABLE;
  const { state } = ctx.state;
  const record = state.agentPolicies.get(key.keyRef);
  const now = ctx.now();
  const day = utcDay(now);
  const month = utcMonth(now);
  const usage = record?.policy
    ? usageOn(record.usage, day, month)
    : usageOn(emptyUsage(day, month), day, month);
  return succeed({
    key_ref: key.keyRef,
    policy: record?.document ?? null,
    version: record?.version ?? 0,
    usage: {
      day,
      month,
      transfers: {
        day_units: usage.transfers.dayUnits.toString(),
        month_units: usage.transfers.monthUnits.toString(),
        day_count: usage.transfers.dayCount,
      },
      x402: {
        day_units: usage.x402.dayUnits.toString(),
        day_count: usage.x402.dayCount,
        payees: Object.fromEntries(
          [...usage.x402.payeeDayUnits].map(([payee, units]) => [payee, units.toString()]),
        ),
      },
    },
    node_frozen: state.nodeFrozen,
  });
};
