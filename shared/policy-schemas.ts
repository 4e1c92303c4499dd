/**
 * Wire schemas of the agent's policy routes (docs/api.md#spending-policies): GET, PATCH and the check
 * call of {base}/agent/v1/policy. The document itself is shared/agent-policy.ts's. Runtime-neutral.
 */
import * as z from "zod";
import { storedAgentPolicySchema } from "./agent-policy.ts";
import { addressSchema } from "./enclave-ops.ts";
import { unitsAmountSchema, x402PaymentRequiredSchema } from "./gateway-schemas.ts";
import { nestsAtMost } from "./json-depth.ts";

/** One budget of the policy: its limit, what is used of its window, what remains, when it resets. */
export const policyBudgetSchema = z.object({
  /** The document's path of the figure (`transfers.daily_units`, `x402.payees[0x…].daily_units`). */
  rule: z.string(),
  /** Units, or a count for the `*_count` rules. */
  limit: z.string(),
  used: z.string(),
  remaining: z.string(),
  /** When the window starts again (the next UTC midnight, or the first of the next UTC month). */
  resets_at: z.string(),
});

export const policyResponseSchema = z.object({
  /**
   * The agent's policy as sealed in the enclave; null: the node's limits only. As stored, not as it
   * may be written now: a resource prefix an earlier release took still reads
   * (shared/agent-policy.ts storedAgentPolicySchema).
   */
  policy: storedAgentPolicySchema.nullable(),
  /** The enclave's version of it (+1 on each change); null without a policy. */
  version: z.number().int().nullable(),
  /** An operator froze every agent of the node: every money request is refused. */
  node_frozen: z.boolean(),
  budgets: z.array(policyBudgetSchema),
});
export type PolicyResponse = z.infer<typeof policyResponseSchema>;

/** The document nests four deep (policy, x402, payees, a payee); a patch may name no deeper field. */
const MAX_PATCH_DEPTH = 8;

/**
 * PATCH: a JSON merge patch of the document (RFC 7386: null removes a field, lists are replaced).
 * Its depth is bounded before anything recurses into it: the merge and the schema walk a patch
 * recursively, and a 100 KiB body can nest twenty thousand deep.
 */
export const policyPatchSchema = z
  .record(z.string(), z.unknown())
  .refine((patch) => nestsAtMost(patch, MAX_PATCH_DEPTH), {
    message: `the patch nests deeper than any field of a policy (at most ${MAX_PATCH_DEPTH} levels)`,
  });

export const policyCheckRequestSchema = z.union([
  z.strictObject({ transfer: z.strictObject({ to: addressSchema, amount: unitsAmountSchema }) }),
  z.strictObject({ x402: z.strictObject({ payment_required: x402PaymentRequiredSchema }) }),
]);
export type PolicyCheckRequest = z.infer<typeof policyCheckRequestSchema>;

export const policyCheckResponseSchema = z.object({
  decision: z.enum(["allow", "hold", "deny"]),
  /** The rule that decided a hold or a deny; null for allow. */
  rule: z.string().nullable(),
  /** What remains under that rule (units or a count; "0" for a deny that is not a budget); null otherwise. */
  remaining: z.string().nullable(),
});
export type PolicyCheckResponse = z.infer<typeof policyCheckResponseSchema>;
