/**
 * The check call's x402 half (docs/x402.md#many-sellers-the-node-ceiling-and-the-agents-policy): what `POST /agent/v1/x402/authorize`
 * would decide of a quote, now, reserving nothing. The same entry choice and evaluation as
 * authorize (authorize-policy.ts, shared/agent-policy.ts); the node's own refusals of the quote
 * (its 422s, and its daily count's 429) answer "deny" with a `node.` rule named after the error
 * code authorize answers, so an agent checking first learns every refusal authorize would make.
 */
import { evaluateX402, NO_AGENT_POLICY, type PolicyDecision } from "../../../shared/agent-policy.ts";
import type { X402PaymentRequired } from "../../../shared/gateway-schemas.ts";
import type { AuthenticatedAgent } from "../../http/env.ts";
import type { PolicyState } from "../../policy/store.ts";
import { chooseUnderPolicy, type X402NodeTerms } from "./authorize-policy.ts";
import { chooseRequirement } from "./authorize-requirement.ts";

export type X402PolicyDecision = (
  agent: AuthenticatedAgent,
  state: PolicyState,
  paymentRequired: X402PaymentRequired,
) => PolicyDecision;

/** The decision function over the node's terms (its pair, the sealed ceiling) and its daily count. */
export function createX402PolicyDecision(terms: X402NodeTerms, dailyLimit: number): X402PolicyDecision {
  return (_agent, state, paymentRequired) => {
    const bounded = state.stored !== null || state.nodeFrozen;
    const chosen = bounded
      ? chooseUnderPolicy(paymentRequired, terms, {
          policy: state.stored?.policy ?? null,
          usage: state.usage,
          nodeFrozen: state.nodeFrozen,
        })
      : chooseRequirement(paymentRequired, terms.pair);
    if (!chosen.ok) return { decision: "deny", rule: `node.${chosen.error.code}`, remaining: "0" };
    // Authorize answers its 429 before the policy decides (no action is written past the count).
    if (state.usage.x402.dayCount >= dailyLimit) {
      return { decision: "deny", rule: "node.x402_daily_limit", remaining: "0" };
    }
    if ("decision" in chosen.value) return chosen.value.decision;
    // No policy and a node not frozen: what authorize signs today is allowed (the freeze and the
    // node's default payee are all evaluateX402 would look at, and the pair passed already).
    return evaluateX402(
      NO_AGENT_POLICY,
      state.usage,
      { payTo: terms.pair.payTo, amountUnits: terms.pair.amountUnits },
      { payTo: chosen.value.payTo, amountUnits: terms.pair.amountUnits, resource: null },
      { nodeFrozen: false, approved: false },
    );
  };
}
