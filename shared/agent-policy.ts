/**
 * An agent's spending policy (docs/agents.md#your-spending-policy): the document, what one request
 * is against it (allow, hold or deny, and the rule that decided), and whether a change loosens it.
 * One module for the gateway's evaluation, its check route and the enclave's re-check, so the
 * answer an agent is given and the refusal the enclave would make never disagree by a rule.
 * Pure and runtime-neutral: no `node:` imports, no clock (the caller's usage is of its own day).
 *
 * A policy only narrows the node: the node's own limits and sealed x402 ceiling apply on top, and
 * are checked where they always were. What this module decides is the agent's part.
 */
import * as z from "zod";
import { hasControlCharacter } from "./control-characters.ts";
import { addressSchema, uintStringSchema } from "./enclave-ops.ts";

const units = uintStringSchema;
const count = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
/**
 * A payee entry's resource prefix: an absolute URL's beginning, as the 402's `resource` names it.
 * No control character: a URL has none, and Postgres cannot store a NUL, so a policy holding one
 * would be sealed by the enclave and then fail to be stored.
 */
const resourcePrefix = z
  .string()
  .min(1)
  .max(512)
  .refine((prefix) => !hasControlCharacter(prefix), "no control characters");

export const MAX_POLICY_ADDRESSES = 1000;
export const MAX_POLICY_PAYEES = 256;

/** The policy document, as agents and operators write it; every field optional, amounts in units. */
function policyDocumentSchema(prefix: z.ZodType<string>) {
  return z.strictObject({
    transfers: z
      .strictObject({
        per_tx_units: units.optional(),
        daily_units: units.optional(),
        monthly_units: units.optional(),
        daily_count: count.optional(),
        allow: z.array(addressSchema).max(MAX_POLICY_ADDRESSES).optional(),
        deny: z.array(addressSchema).max(MAX_POLICY_ADDRESSES).optional(),
      })
      .optional(),
    x402: z
      .strictObject({
        payees: z
          .array(
            z.strictObject({
              pay_to: addressSchema,
              resource_prefix: prefix.optional(),
              per_payment_units: units,
              daily_units: units.optional(),
            }),
          )
          .max(MAX_POLICY_PAYEES)
          .optional(),
        daily_units: units.optional(),
        daily_count: count.optional(),
        unknown_payee: z.enum(["deny", "hold"]).optional(),
      })
      .optional(),
    approval_above_units: units.optional(),
    frozen: z.boolean().optional(),
  });
}

/** A policy document as it may be written: what a change is checked against. */
export const agentPolicySchema = policyDocumentSchema(resourcePrefix);
/**
 * A policy document as it may have been stored: as written, but a resource prefix holding a control
 * character, which versions before the rule above took (all but NUL), still reads.
 */
export const storedAgentPolicySchema = policyDocumentSchema(z.string().min(1).max(512));
export type AgentPolicyDocument = z.infer<typeof agentPolicySchema>;

export type PolicyPayee = {
  payTo: string;
  resourcePrefix: string | null;
  perPaymentUnits: bigint;
  dailyUnits: bigint | null;
};

/** The document in memory: bigint amounts, lowercase addresses, null where it sets nothing. */
export type AgentPolicy = {
  transfers: {
    perTxUnits: bigint | null;
    dailyUnits: bigint | null;
    monthlyUnits: bigint | null;
    dailyCount: number | null;
    allow: ReadonlySet<string> | null;
    deny: ReadonlySet<string>;
  };
  x402: {
    /** null: the node's default, its one sealed payee at its exact amount. */
    payees: readonly PolicyPayee[] | null;
    dailyUnits: bigint | null;
    dailyCount: number | null;
    unknownPayee: "deny" | "hold";
  };
  approvalAboveUnits: bigint | null;
  frozen: boolean;
};

const big = (value: string | undefined): bigint | null => (value === undefined ? null : BigInt(value));
const lower = (addresses: readonly string[]): Set<string> =>
  new Set(addresses.map((address) => address.toLowerCase()));

export function policyFromDocument(document: AgentPolicyDocument): AgentPolicy {
  const { transfers = {}, x402 = {} } = document;
  return {
    transfers: {
      perTxUnits: big(transfers.per_tx_units),
      dailyUnits: big(transfers.daily_units),
      monthlyUnits: big(transfers.monthly_units),
      dailyCount: transfers.daily_count ?? null,
      allow: transfers.allow ? lower(transfers.allow) : null,
      deny: lower(transfers.deny ?? []),
    },
    x402: {
      payees:
        x402.payees?.map((payee) => ({
          payTo: payee.pay_to.toLowerCase(),
          resourcePrefix: payee.resource_prefix ?? null,
          perPaymentUnits: BigInt(payee.per_payment_units),
          dailyUnits: big(payee.daily_units),
        })) ?? null,
      dailyUnits: big(x402.daily_units),
      dailyCount: x402.daily_count ?? null,
      unknownPayee: x402.unknown_payee ?? "deny",
    },
    approvalAboveUnits: big(document.approval_above_units),
    frozen: document.frozen ?? false,
  };
}

/** The document form, with only what the policy sets: policyFromDocument's inverse. */
export function policyToDocument(policy: AgentPolicy): AgentPolicyDocument {
  const text = (value: bigint | null): string | undefined => (value === null ? undefined : value.toString());
  const { transfers, x402 } = policy;
  const transfersDocument = dropUndefined({
    per_tx_units: text(transfers.perTxUnits),
    daily_units: text(transfers.dailyUnits),
    monthly_units: text(transfers.monthlyUnits),
    daily_count: transfers.dailyCount ?? undefined,
    allow: transfers.allow ? [...transfers.allow] : undefined,
    deny: transfers.deny.size > 0 ? [...transfers.deny] : undefined,
  });
  const x402Document = dropUndefined({
    payees: x402.payees?.map((payee) =>
      dropUndefined({
        pay_to: payee.payTo,
        resource_prefix: payee.resourcePrefix ?? undefined,
        per_payment_units: payee.perPaymentUnits.toString(),
        daily_units: text(payee.dailyUnits),
      }),
    ),
    daily_units: text(x402.dailyUnits),
    daily_count: x402.dailyCount ?? undefined,
    unknown_payee: x402.unknownPayee === "hold" ? ("hold" as const) : undefined,
  });
  return dropUndefined({
    transfers: Object.keys(transfersDocument).length > 0 ? transfersDocument : undefined,
    x402: Object.keys(x402Document).length > 0 ? x402Document : undefined,
    approval_above_units: text(policy.approvalAboveUnits),
    frozen: policy.frozen ? true : undefined,
  }) as AgentPolicyDocument;
}

/** Two policy documents alike once both are in their canonical form (what a change stores and seals). */
export function samePolicyDocument(a: AgentPolicyDocument | null, b: AgentPolicyDocument | null): boolean {
  const canonical = (document: AgentPolicyDocument | null): string =>
    document === null ? "null" : JSON.stringify(policyToDocument(policyFromDocument(document)));
  return canonical(a) === canonical(b);
}

function dropUndefined<T extends Record<string, unknown>>(value: T): T {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== undefined)) as T;
}

/** The policy that sets nothing: what an agent without one is held to (the node's limits only). */
export const NO_AGENT_POLICY: AgentPolicy = policyFromDocument({});

/** The node's one x402 payee and its exact amount (the spec's pair), when the node has x402 on. */
export type NodePayee = { payTo: string; amountUnits: bigint };

/** What an agent has used of its policy's windows (UTC day and month), as gross amounts. */
export type PolicyUsage = {
  transfers: { dayUnits: bigint; monthUnits: bigint; dayCount: number };
  x402: { dayUnits: bigint; dayCount: number; payeeDayUnits: ReadonlyMap<string, bigint> };
};

export const NO_USAGE: PolicyUsage = {
  transfers: { dayUnits: 0n, monthUnits: 0n, dayCount: 0 },
  x402: { dayUnits: 0n, dayCount: 0, payeeDayUnits: new Map() },
};

export type PolicyDecision =
  | { decision: "allow" }
  | {
      decision: "hold" | "deny";
      /** The rule that decided, named as the document's path (`transfers.daily_units`). */
      rule: string;
      /**
       * What remains under the rule that decided: of its budget (units, or a count), "0" for a
       * deny that is not a budget (a frozen agent, a recipient off the list), null for a hold.
       */
      remaining: string | null;
    };

type Finding = { decision: "hold" | "deny"; rule: string; remaining: string | null };

/** Deny wins, then hold, then allow; the first finding of the winning kind names the rule. */
function decide(findings: readonly Finding[]): PolicyDecision {
  return (
    findings.find((finding) => finding.decision === "deny") ??
    findings.find((finding) => finding.decision === "hold") ?? { decision: "allow" }
  );
}

const remainingOf = (limit: bigint, used: bigint): string => (limit > used ? limit - used : 0n).toString();

export type TransferRequest = {
  to: string;
  /** Value plus the maximum fee, as every limit counts it (shared/fees.ts costUnits). */
  costUnits: bigint;
};

export type Circumstances = {
  /** The whole node is frozen (an operator froze every agent at once). */
  nodeFrozen: boolean;
  /** An operator approved this very request (a held action, by its hash). */
  approved: boolean;
};

/** One transfer against the agent's policy and what it used of its windows. */
export function evaluateTransfer(
  policy: AgentPolicy,
  usage: PolicyUsage,
  request: TransferRequest,
  at: Circumstances,
): PolicyDecision {
  const findings: Finding[] = [];
  const deny = (rule: string, remaining = "0") => findings.push({ decision: "deny", rule, remaining });
  if (at.nodeFrozen) deny("node.frozen");
  if (policy.frozen) deny("frozen");
  const { transfers } = policy;
  const to = request.to.toLowerCase();
  if (transfers.deny.has(to)) deny("transfers.deny");
  if (transfers.allow && !transfers.allow.has(to)) deny("transfers.allow");
  const cost = request.costUnits;
  if (transfers.perTxUnits !== null && cost > transfers.perTxUnits) {
    deny("transfers.per_tx_units", transfers.perTxUnits.toString());
  }
  const { dayUnits, monthUnits, dayCount } = usage.transfers;
  if (transfers.dailyUnits !== null && dayUnits + cost > transfers.dailyUnits) {
    deny("transfers.daily_units", remainingOf(transfers.dailyUnits, dayUnits));
  }
  if (transfers.monthlyUnits !== null && monthUnits + cost > transfers.monthlyUnits) {
    deny("transfers.monthly_units", remainingOf(transfers.monthlyUnits, monthUnits));
  }
  if (transfers.dailyCount !== null && dayCount + 1 > transfers.dailyCount) {
    deny("transfers.daily_count", String(Math.max(0, transfers.dailyCount - dayCount)));
  }
  if (!at.approved && policy.approvalAboveUnits !== null && cost > policy.approvalAboveUnits) {
    findings.push({ decision: "hold", rule: "approval_above_units", remaining: null });
  }
  return decide(findings);
}

export type X402Request = {
  payTo: string;
  amountUnits: bigint;
  /** The resource the 402 names; null where it is not known (the enclave signs without it). */
  resource: string | null;
};

/**
 * The payee entry a payment falls under: the policy's list, or the node's default list of one (its
 * pair, at its exact amount). With a resource, an entry with a prefix applies only to the resources
 * it begins; without one (the enclave's view), any entry of the payee does. `payeeToday` is what
 * the payee was paid today, which an entry's daily units bound.
 */
export function payeeEntry(
  policy: AgentPolicy,
  node: NodePayee | null,
  request: X402Request,
  payeeToday: bigint,
): PolicyPayee | undefined {
  const payTo = request.payTo.toLowerCase();
  if (policy.x402.payees === null) {
    if (!node || node.payTo.toLowerCase() !== payTo || node.amountUnits !== request.amountUnits)
      return undefined;
    return { payTo, resourcePrefix: null, perPaymentUnits: node.amountUnits, dailyUnits: null };
  }
  const matches = policy.x402.payees.filter(
    (payee) =>
      payee.payTo === payTo &&
      (payee.resourcePrefix === null ||
        request.resource === null ||
        request.resource.startsWith(payee.resourcePrefix)),
  );
  // Several entries of one payee (one per resource prefix) may apply; each alone would allow the
  // payment, so one that allows it decides, whatever the others' limits. A larger per-payment limit
  // says nothing of the daily units: an entry is judged on both. When none allows it, the one with
  // the largest per-payment limit names the refusal.
  const allows = (entry: PolicyPayee) =>
    request.amountUnits <= entry.perPaymentUnits &&
    (entry.dailyUnits === null || payeeToday + request.amountUnits <= entry.dailyUnits);
  return matches.find(allows) ?? matches.sort((a, b) => (a.perPaymentUnits > b.perPaymentUnits ? -1 : 1))[0];
}

/** One x402 authorization against the agent's policy and what it used of its day. */
export function evaluateX402(
  policy: AgentPolicy,
  usage: PolicyUsage,
  node: NodePayee | null,
  request: X402Request,
  at: Circumstances,
): PolicyDecision {
  const findings: Finding[] = [];
  const deny = (rule: string, remaining = "0") => findings.push({ decision: "deny", rule, remaining });
  if (at.nodeFrozen) deny("node.frozen");
  if (policy.frozen) deny("frozen");
  const payTo = request.payTo.toLowerCase();
  const amount = request.amountUnits;
  const payeeToday = usage.x402.payeeDayUnits.get(payTo) ?? 0n;
  const entry = payeeEntry(policy, node, request, payeeToday);
  if (!entry) {
    if (policy.x402.unknownPayee === "hold" && !at.approved) {
      findings.push({ decision: "hold", rule: "x402.unknown_payee", remaining: null });
    } else if (policy.x402.unknownPayee === "deny") {
      deny("x402.payees");
    }
  } else {
    const rule = `x402.payees[${payTo}]`;
    if (amount > entry.perPaymentUnits) deny(`${rule}.per_payment_units`, entry.perPaymentUnits.toString());
    if (entry.dailyUnits !== null && payeeToday + amount > entry.dailyUnits) {
      deny(`${rule}.daily_units`, remainingOf(entry.dailyUnits, payeeToday));
    }
  }
  const { dayUnits, dayCount } = usage.x402;
  const { dailyUnits, dailyCount } = policy.x402;
  if (dailyUnits !== null && dayUnits + amount > dailyUnits) {
    deny("x402.daily_units", remainingOf(dailyUnits, dayUnits));
  }
  if (dailyCount !== null && dayCount + 1 > dailyCount) {
    deny("x402.daily_count", String(Math.max(0, dailyCount - dayCount)));
  }
  if (!at.approved && policy.approvalAboveUnits !== null && amount > policy.approvalAboveUnits) {
    findings.push({ decision: "hold", rule: "approval_above_units", remaining: null });
  }
  return decide(findings);
}

/**
 * What `next` allows that `current` did not, by field: empty when the change only tightens (or
 * changes nothing), which the origin's admin capability may make alone. Anything else needs an
 * operator's signature. A figure left out allows more than any figure; a list left out allows
 * anyone (allow) or no one more (deny); the default payee list is the node's pair at its amount.
 */
export function loosenings(current: AgentPolicy, next: AgentPolicy, node: NodePayee | null): string[] {
  const found: string[] = [];
  const figure = (field: string, now: bigint | number | null, then: bigint | number | null) => {
    if (now !== null && (then === null || then > now)) found.push(field);
  };
  const t = [current.transfers, next.transfers] as const;
  figure("transfers.per_tx_units", t[0].perTxUnits, t[1].perTxUnits);
  figure("transfers.daily_units", t[0].dailyUnits, t[1].dailyUnits);
  figure("transfers.monthly_units", t[0].monthlyUnits, t[1].monthlyUnits);
  figure("transfers.daily_count", t[0].dailyCount, t[1].dailyCount);
  if (t[0].allow && (!t[1].allow || [...t[1].allow].some((address) => !t[0].allow!.has(address)))) {
    found.push("transfers.allow");
  }
  if ([...t[0].deny].some((address) => !t[1].deny.has(address))) found.push("transfers.deny");
  const x = [current.x402, next.x402] as const;
  if (!payeesNarrow(current, next, node)) found.push("x402.payees");
  figure("x402.daily_units", x[0].dailyUnits, x[1].dailyUnits);
  figure("x402.daily_count", x[0].dailyCount, x[1].dailyCount);
  if (x[0].unknownPayee === "deny" && x[1].unknownPayee === "hold") found.push("x402.unknown_payee");
  figure("approval_above_units", current.approvalAboveUnits, next.approvalAboveUnits);
  if (current.frozen && !next.frozen) found.push("frozen");
  return found;
}

/** Every payment `next`'s payee list allows, `current`'s allowed too (entry by entry). */
function payeesNarrow(current: AgentPolicy, next: AgentPolicy, node: NodePayee | null): boolean {
  if (next.x402.payees === null) return current.x402.payees === null;
  const before: readonly PolicyPayee[] =
    current.x402.payees ??
    (node
      ? [
          {
            payTo: node.payTo.toLowerCase(),
            resourcePrefix: null,
            perPaymentUnits: node.amountUnits,
            dailyUnits: null,
          },
        ]
      : []);
  return next.x402.payees.every((entry) =>
    before.some(
      (was) =>
        was.payTo === entry.payTo &&
        (was.resourcePrefix === null || entry.resourcePrefix?.startsWith(was.resourcePrefix) === true) &&
        entry.perPaymentUnits <= was.perPaymentUnits &&
        (was.dailyUnits === null || (entry.dailyUnits !== null && entry.dailyUnits <= was.dailyUnits)),
    ),
  );
}

/**
 * A JSON merge patch (RFC 7386) of a policy document: objects merge, null removes a field, anything
 * else replaces it (lists too). What PATCH /agent/v1/policy applies before it checks the result.
 */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (typeof patch !== "object" || patch === null || Array.isArray(patch)) return patch;
  const base: Record<string, unknown> =
    typeof target === "object" && target !== null && !Array.isArray(target)
      ? { ...(target as Record<string, unknown>) }
      : {};
  for (const [field, value] of Object.entries(patch)) {
    if (value === null) {
      delete base[field];
      continue;
    }
    // An own property whatever its name: `__proto__` set by assignment would change the object's
    // prototype (and the schema would read a field through it) instead of being refused as unknown.
    const before = Object.hasOwn(base, field) ? base[field] : undefined;
    Object.defineProperty(base, field, {
      value: mergePatch(before, value),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return base;
}
