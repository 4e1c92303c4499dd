/**
 * Which entry of a 402 quote an agent with a spending policy (or on a frozen node) may authorize,
 * and what its policy decides of it (docs/x402.md#many-sellers-the-node-ceiling-and-the-agents-policy).
 * The node's part: the sealed pair exactly (AGENT_X402_AMOUNT to AGENT_X402_PAY_TO), or, when the
 * enclave has a ceiling sealed, any amount up to it to any payee its list allows. The agent's part:
 * shared/agent-policy.ts's evaluateX402, the one evaluation the enclave re-checks with. Pure: the
 * route and the check call turn the answer into theirs.
 */
import {
  type AgentPolicy,
  evaluateX402,
  NO_AGENT_POLICY,
  type NodePayee,
  type PolicyDecision,
  type PolicyUsage,
} from "../../../shared/agent-policy.ts";
import type { X402PaymentRequired } from "../../../shared/gateway-schemas.ts";
import { err, ok, type Result } from "../../../shared/result.ts";
import {
  type ChosenRequirement,
  checksumRefusal,
  checkTimeout,
  describeQuoted,
  isOurScheme,
  quotedAddress,
  type RequirementRefusal,
  unsupported,
  versionRefusal,
  type X402AuthorizePolicy,
} from "./authorize-requirement.ts";

/** The enclave's sealed x402 ceiling (get_policy): the most one payment may be, and to whom. */
export type X402Ceiling = {
  maxPerPaymentUnits: bigint;
  /** Lowercase; null: any payee. */
  payees: ReadonlySet<string> | null;
};

/** What the node allows an agent to pay: its configured pair, and the sealed ceiling if any. */
export type X402NodeTerms = {
  pair: X402AuthorizePolicy;
  ceiling: X402Ceiling | null;
};

/** The agent's side: its policy (null: none) and what it used, and the node's freeze. */
export type X402PolicyFacts = {
  policy: AgentPolicy | null;
  usage: PolicyUsage;
  nodeFrozen: boolean;
};

/** The entry chosen, its amount as a bigint, and what the policy decides of it. */
export type PolicyChoice = {
  chosen: ChosenRequirement;
  amountUnits: bigint;
  decision: PolicyDecision;
};

/** Uint strings as x402 writes amounts; at most 78 digits, as a numeric(78, 0) column holds. */
const UNITS = /^(0|[1-9][0-9]{0,77})$/;

/**
 * The entry a repeat was first made for (`prefer`) if the node pays it; else the first `exact` /
 * eip155:77 entry both the node and the policy allow; when none is, the policy's answer (hold or
 * deny) for the first entry the node would pay; when the node pays none, the first entry's refusal
 * (a 422), as without a policy.
 */
export function chooseUnderPolicy(
  quote: X402PaymentRequired,
  terms: X402NodeTerms,
  facts: X402PolicyFacts,
  options: {
    approved?: boolean;
    /**
     * An entry to take whatever the policy says of it, if the node pays it: a repeat's, the one
     * its first request was made for (its budgets may have moved since, by its own signature).
     */
    prefer?: (index: number) => boolean;
  } = {},
): Result<PolicyChoice, RequirementRefusal> {
  const approved = options.approved ?? false;
  const version = versionRefusal(quote);
  if (version) return err(version);
  const resource = typeof quote.resource.url === "string" ? quote.resource.url : null;
  const node: NodePayee = { payTo: terms.pair.payTo, amountUnits: terms.pair.amountUnits };
  let firstRefusal: RequirementRefusal | undefined;
  let firstAllowed: PolicyChoice | undefined;
  let firstHeldOrDenied: PolicyChoice | undefined;
  for (const [index, entry] of quote.accepts.entries()) {
    if (!isOurScheme(entry)) continue;
    const checked = checkNodeTerms(entry, terms);
    if ("code" in checked) {
      firstRefusal ??= checked;
      continue;
    }
    const { amountUnits, ...rest } = checked;
    const decision = evaluateX402(
      facts.policy ?? NO_AGENT_POLICY,
      facts.usage,
      node,
      { payTo: rest.payTo, amountUnits, resource },
      { nodeFrozen: facts.nodeFrozen, approved },
    );
    const choice: PolicyChoice = { chosen: { index, ...rest }, amountUnits, decision };
    // A repeat's entry before any other the policy allows now: an earlier entry allowed since the
    // first request (a new UTC day, an operator's loosening) is another request under its key.
    if (options.prefer?.(index)) return ok(choice);
    if (decision.decision === "allow") firstAllowed ??= choice;
    else firstHeldOrDenied ??= choice;
  }
  const chosen = firstAllowed ?? firstHeldOrDenied;
  if (chosen) return ok(chosen);
  return err(firstRefusal ?? unsupported());
}

/** The node's part of one entry: the pair exactly, or within the ceiling; and the validity bound. */
function checkNodeTerms(
  entry: Record<string, unknown>,
  terms: X402NodeTerms,
): (Omit<ChosenRequirement, "index"> & { amountUnits: bigint }) | RequirementRefusal {
  const { pair, ceiling } = terms;
  const amount = typeof entry.amount === "string" && UNITS.test(entry.amount) ? entry.amount : undefined;
  const quotedPayTo = typeof entry.payTo === "string" ? entry.payTo : "";
  const payTo = quotedAddress(entry.payTo);
  const isPair = amount === pair.amountUnits.toString() && payTo === pair.payTo;
  if (!isPair) {
    if (!ceiling) {
      if (amount !== pair.amountUnits.toString()) return amountRefusal(pair, null, entry.amount);
      return payToRefusal(pair, null, entry.payTo);
    }
    if (amount === undefined || BigInt(amount) > ceiling.maxPerPaymentUnits) {
      return amountRefusal(pair, ceiling, entry.amount);
    }
    if (payTo === undefined || (ceiling.payees !== null && !ceiling.payees.has(payTo))) {
      return payToRefusal(pair, ceiling, entry.payTo);
    }
  }
  const timeout = checkTimeout(entry, pair);
  if (typeof timeout !== "number") return timeout;
  return {
    amount: amount!,
    amountUnits: BigInt(amount!),
    payTo: payTo as `0x${string}`,
    quotedPayTo,
    maxTimeoutSeconds: timeout,
  };
}

function amountRefusal(
  pair: X402AuthorizePolicy,
  ceiling: X402Ceiling | null,
  quoted: unknown,
): RequirementRefusal {
  const allowed = ceiling
    ? `at most ${ceiling.maxPerPaymentUnits} units per payment (the enclave's sealed x402 ceiling), or exactly ${pair.amountUnits} to ${pair.payTo}`
    : `exactly ${pair.amountUnits} units per payment (AGENT_X402_AMOUNT)`;
  return {
    code: "x402_amount_not_allowed",
    message: `this node authorizes ${allowed}; the quote asks for ${describeQuoted(quoted)}`,
  };
}

function payToRefusal(
  pair: X402AuthorizePolicy,
  ceiling: X402Ceiling | null,
  quoted: unknown,
): RequirementRefusal {
  const checksum = checksumRefusal(quoted);
  if (checksum) return checksum;
  const allowed =
    ceiling?.payees != null
      ? `the payees of the enclave's sealed x402 ceiling (${ceiling.payees.size}) and ${pair.payTo} (AGENT_X402_PAY_TO)`
      : `${pair.payTo} only (AGENT_X402_PAY_TO)`;
  return {
    code: "x402_pay_to_not_allowed",
    message: `this node authorizes payments to ${allowed}; the quote pays ${describeQuoted(quoted)}`,
  };
}
