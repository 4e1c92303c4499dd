/**
 * The agent's own policy routes (docs/api.md#spending-policies): GET {base}/agent/v1/policy, PATCH
 * (tighten only: a loosening needs an operator), and POST …/policy/check, which answers what a
 * request would meet and signs and reserves nothing.
 */
import type { Handler } from "hono";
import * as z from "zod";
import {
  type AgentPolicyDocument,
  agentPolicySchema,
  evaluateTransfer,
  mergePatch,
  NO_AGENT_POLICY,
  type PolicyDecision,
} from "../../shared/agent-policy.ts";
import type { X402PaymentRequired } from "../../shared/gateway-schemas.ts";
import {
  type PolicyCheckResponse,
  policyCheckRequestSchema,
  policyPatchSchema,
} from "../../shared/policy-schemas.ts";
import { otherX402Version } from "../../shared/x402-version.ts";
import type { Clock } from "../clock.ts";
import type { Db } from "../db/client.ts";
import { AppError } from "../errors.ts";
import type { AppEnv, AuthenticatedAgent } from "../http/env.ts";
import { parseJsonBody, parseJsonValue, readJsonBody } from "../http/json-body.ts";
import { changeAgentPolicy, type PolicyChangeDeps, type PolicyChangeError } from "./change.ts";
import { type PolicyState, readPolicyState } from "./store.ts";
import { policyView } from "./view.ts";

/** A policy with 1,000 addresses in each list is about 90 KB of JSON. */
const MAX_PATCH_BYTES = 128 * 1024;

export type PolicyRouteDeps = {
  db: Db;
  clock: Clock;
  /** Seals and stores changes; absent where the enclave is not configured (the PATCH is then disabled). */
  change: PolicyChangeDeps | undefined;
  /** The node's side of a transfer's check (actions/transfer-checks.ts); absent with transfers off. */
  transfers: TransferChecks | undefined;
  /** The x402 side's answer for a 402 quote (its payee, amount and resource); absent with x402 off. */
  x402Decision:
    | ((
        agent: AuthenticatedAgent,
        state: PolicyState,
        paymentRequired: X402PaymentRequired,
      ) => PolicyDecision)
    | undefined;
};

export type TransferChecks = {
  /** A transfer's cost as the limits count it, at the fees a transfer would be signed with now. */
  costUnits(amountUnits: bigint): Promise<bigint>;
  /** The node's rule refusing a transfer to `to` (lowercase) whatever the policy, if one does. */
  recipientRule(to: string): string | undefined;
};

export function getPolicyHandler(deps: Pick<PolicyRouteDeps, "db" | "clock">): Handler<AppEnv> {
  return async (c) => {
    const now = deps.clock.now();
    return c.json(policyView(await readPolicyState(deps.db, c.get("agent").agentId, now), now));
  };
}

export function patchPolicyHandler(deps: PolicyRouteDeps): Handler<AppEnv> {
  return async (c) => {
    const { change } = deps;
    if (!change)
      throw new AppError("feature_disabled", "policies cannot be changed on this node (no signer)");
    const patch = await parseJsonBody(c, policyPatchSchema, MAX_PATCH_BYTES);
    const agent = c.get("agent");
    // Merged under the agent's lock onto what is stored then: a patch read against a policy another
    // change replaced meanwhile would undo that change's tightening and be refused as a loosening.
    const patched = (stored: AgentPolicyDocument | null): AgentPolicyDocument => {
      const next = agentPolicySchema.safeParse(mergePatch(stored ?? {}, patch));
      if (!next.success) {
        const issue = next.error.issues[0];
        throw new AppError(
          "validation_failed",
          `the policy after the patch is not valid: ${issue ? `${issue.path.join(".") || "policy"}: ${issue.message}` : "invalid"}`,
        );
      }
      return next.data;
    };
    const changed = await changeAgentPolicy(change, { agent, next: patched, changedBy: { by: "agent" } });
    if (!changed.ok) throw changeRefusal(changed.error);
    const now = deps.clock.now();
    return c.json(policyView(await readPolicyState(deps.db, agent.agentId, now), now));
  };
}

export function checkPolicyHandler(deps: PolicyRouteDeps): Handler<AppEnv> {
  return async (c) => {
    const { raw } = await readJsonBody(c, z.unknown(), 64 * 1024);
    // A quote of another x402 version is what authorize refuses first, whatever its shape (its
    // 422 x402_requirement_unsupported): the check answers that, not a malformed request.
    if (otherX402Version(x402QuoteSent(raw)) !== undefined) {
      if (!deps.x402Decision)
        throw new AppError("feature_disabled", "x402 authorization is not available on this node");
      const denied: PolicyCheckResponse = {
        decision: "deny",
        rule: "node.x402_requirement_unsupported",
        remaining: "0",
      };
      return c.json(denied);
    }
    const body = parseJsonValue(policyCheckRequestSchema, raw);
    const agent = c.get("agent");
    const policyState = (): Promise<PolicyState> => readPolicyState(deps.db, agent.agentId, deps.clock.now());
    let decision: PolicyDecision;
    if ("transfer" in body) {
      if (!deps.transfers) throw new AppError("feature_disabled", "transfers are not available on this node");
      // The node refuses such a recipient before the policy is read: the check says so, not allow.
      const nodeRule = deps.transfers.recipientRule(body.transfer.to.toLowerCase());
      if (nodeRule !== undefined) return c.json({ decision: "deny", rule: nodeRule, remaining: "0" });
      const state = await policyState();
      const costUnits = await deps.transfers.costUnits(BigInt(body.transfer.amount));
      decision = evaluateTransfer(
        state.stored?.policy ?? NO_AGENT_POLICY,
        state.usage,
        { to: body.transfer.to, costUnits },
        { nodeFrozen: state.nodeFrozen, approved: false },
      );
    } else {
      if (!deps.x402Decision)
        throw new AppError("feature_disabled", "x402 authorization is not available on this node");
      decision = deps.x402Decision(agent, await policyState(), body.x402.payment_required);
    }
    const answer: PolicyCheckResponse =
      decision.decision === "allow"
        ? { decision: "allow", rule: null, remaining: null }
        : { decision: decision.decision, rule: decision.rule, remaining: decision.remaining };
    return c.json(answer);
  };
}

/** The quote of a check body `{"x402": {"payment_required": …}}` as sent, and nothing else. */
function x402QuoteSent(raw: unknown): unknown {
  if (!isOnly(raw, "x402")) return undefined;
  const x402 = raw.x402;
  return isOnly(x402, "payment_required") ? x402.payment_required : undefined;
}

function isOnly<K extends string>(value: unknown, key: K): value is Record<K, unknown> {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    Object.keys(value).length === 1 &&
    key in value
  );
}

function changeRefusal(error: PolicyChangeError): AppError {
  switch (error.code) {
    case "loosening_requires_operator":
      return loosening(error.fields);
    case "signer":
      // The enclave judges against the policy it holds, which may be tighter than the stored one
      // (a change sealed whose row was lost): its loosening is as final as ours, never an outage.
      if (error.failure.detail === "operator_required") {
        return loosening([error.failure.rule ?? "policy"]);
      }
      return new AppError(
        "agent_signer_unavailable",
        `the signer could not seal the change (${error.failure.code}); nothing changed, retry later`,
      );
  }
}

function loosening(fields: readonly string[]): AppError {
  return new AppError(
    "policy_loosening_requires_operator",
    `this change allows more than the policy does (${fields.join(", ")}): only an operator can loosen a policy (npm run policy -- set)`,
    { fields: { loosens: fields.join(",") } },
  );
}
