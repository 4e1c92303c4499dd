import { describe, expect, it } from "vitest";
import {
  type AgentPolicyDocument,
  NO_USAGE,
  type PolicyUsage,
  policyFromDocument,
} from "../../../shared/agent-policy.ts";
import type { X402PaymentRequired } from "../../../shared/gateway-schemas.ts";
import { sellerRequirement } from "../../../testing/x402-quote.ts";
import type { AuthenticatedAgent } from "../../http/env.ts";
import type { PolicyState } from "../../policy/store.ts";
import { chooseUnderPolicy, type X402NodeTerms } from "./authorize-policy.ts";
import { createX402PolicyDecision } from "./policy-decision.ts";

// The entry choice and decision of authorize under a policy, and the check call's answer: pure,
// table-driven (the rules' seams are covered by authorize-policy.int.test.ts).

const PAIR = "0x1111111111111111111111111111111111111111";
const A = "0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const B = "0xbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
const C = "0xcccccccccccccccccccccccccccccccccccccccc";

const entry = (payTo: string, amount: string, overrides: Record<string, unknown> = {}) => ({
  ...sellerRequirement({ payTo, amount: BigInt(amount), extra: { name: "USDC", version: "2" } }),
  ...overrides,
});
const quote = (...accepts: Record<string, unknown>[]): X402PaymentRequired =>
  ({ x402Version: 2, resource: { url: "https://seller.example/item" }, accepts }) as X402PaymentRequired;

const pair = { amountUnits: 10_000n, payTo: PAIR, maxTimeoutSeconds: 180, validityMarginSeconds: 6 };
const withCeiling: X402NodeTerms = { pair, ceiling: { maxPerPaymentUnits: 1_000_000n, payees: null } };
const pairOnly: X402NodeTerms = { pair, ceiling: null };

const POLICY: AgentPolicyDocument = {
  x402: {
    payees: [
      { pay_to: A, per_payment_units: "50000" },
      { pay_to: B, per_payment_units: "10000" },
    ],
    daily_units: "100000",
    daily_count: 3,
  },
};
const usage = (x402: Partial<PolicyUsage["x402"]> = {}): PolicyUsage => ({
  ...NO_USAGE,
  x402: { ...NO_USAGE.x402, ...x402 },
});
const facts = (document: AgentPolicyDocument | null, used = usage(), nodeFrozen = false) => ({
  policy: document ? policyFromDocument(document) : null,
  usage: used,
  nodeFrozen,
});

describe("chooseUnderPolicy", () => {
  const cases: {
    name: string;
    terms: X402NodeTerms;
    quote: X402PaymentRequired;
    facts: ReturnType<typeof facts>;
    index?: number;
    decision?: string;
    rule?: string;
    refusal?: string;
  }[] = [
    {
      name: "pays a listed payee within its per-payment limit",
      terms: withCeiling,
      quote: quote(entry(A, "40000")),
      facts: facts(POLICY),
      index: 0,
      decision: "allow",
    },
    {
      name: "denies a listed payee over its per-payment limit, naming it",
      terms: withCeiling,
      quote: quote(entry(B, "20000")),
      facts: facts(POLICY),
      index: 0,
      decision: "deny",
      rule: `x402.payees[${B}].per_payment_units`,
    },
    {
      name: "takes the first entry allowed, past one denied",
      terms: withCeiling,
      quote: quote(entry(B, "20000"), entry(A, "20000")),
      facts: facts(POLICY),
      index: 1,
      decision: "allow",
    },
    {
      name: "answers the first payable entry's decision when none is allowed",
      terms: withCeiling,
      quote: quote(entry(C, "1"), entry(B, "20000")),
      facts: facts(POLICY),
      index: 0,
      decision: "deny",
      rule: "x402.payees",
    },
    {
      name: "holds an unknown payee when the policy says so",
      terms: withCeiling,
      quote: quote(entry(C, "5000")),
      facts: facts({ x402: { ...POLICY.x402, unknown_payee: "hold" } }),
      index: 0,
      decision: "hold",
      rule: "x402.unknown_payee",
    },
    {
      name: "denies past the day's units",
      terms: withCeiling,
      quote: quote(entry(A, "40000")),
      facts: facts(POLICY, usage({ dayUnits: 70_000n })),
      index: 0,
      decision: "deny",
      rule: "x402.daily_units",
    },
    {
      name: "denies past the day's count",
      terms: withCeiling,
      quote: quote(entry(A, "40000")),
      facts: facts(POLICY, usage({ dayCount: 3 })),
      index: 0,
      decision: "deny",
      rule: "x402.daily_count",
    },
    {
      name: "a frozen node denies even the pair, with or without a policy",
      terms: pairOnly,
      quote: quote(entry(PAIR, "10000")),
      facts: facts(null, usage(), true),
      index: 0,
      decision: "deny",
      rule: "node.frozen",
    },
    {
      name: "without a ceiling, a listed payee other than the pair is the node's 422",
      terms: pairOnly,
      quote: quote(entry(A, "10000")),
      facts: facts(POLICY),
      refusal: "x402_pay_to_not_allowed",
    },
    {
      name: "over the ceiling is the node's 422, whatever the policy",
      terms: { pair, ceiling: { maxPerPaymentUnits: 30_000n, payees: null } },
      quote: quote(entry(A, "40000")),
      facts: facts(POLICY),
      refusal: "x402_amount_not_allowed",
    },
    {
      name: "a payee off the ceiling's list is the node's 422",
      terms: { pair, ceiling: { maxPerPaymentUnits: 1_000_000n, payees: new Set([B]) } },
      quote: quote(entry(A, "40000")),
      facts: facts(POLICY),
      refusal: "x402_pay_to_not_allowed",
    },
    {
      name: "a validity over the bound is the node's 422",
      terms: withCeiling,
      quote: quote(entry(A, "40000", { maxTimeoutSeconds: 181 })),
      facts: facts(POLICY),
      refusal: "x402_validity_too_long",
    },
    {
      name: "a policy without payees pays the node's pair at its exact amount (the default list)",
      terms: withCeiling,
      quote: quote(entry(A, "10000"), entry(PAIR, "10000")),
      facts: facts({ x402: { daily_count: 5 } }),
      index: 1,
      decision: "allow",
    },
  ];
  for (const each of cases) {
    it(each.name, () => {
      const chosen = chooseUnderPolicy(each.quote, each.terms, each.facts);
      if (each.refusal) {
        expect(chosen.ok ? chosen.value : chosen.error.code).toBe(each.refusal);
        return;
      }
      if (!chosen.ok) throw new Error(`refused: ${chosen.error.message}`);
      expect(chosen.value.chosen.index).toBe(each.index);
      expect(chosen.value.decision.decision).toBe(each.decision);
      if (each.rule) expect(chosen.value.decision).toMatchObject({ rule: each.rule });
    });
  }

  it("refuses, under a ceiling open to any payee, a payTo whose mixed case is not its checksum, saying so", () => {
    // 0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed is the EIP-55 example; its first letter turned.
    const checksummed = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
    const off = "0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
    expect(chooseUnderPolicy(quote(entry(checksummed, "20000")), withCeiling, facts(null)).ok).toBe(true);
    const refused = chooseUnderPolicy(quote(entry(off, "20000")), withCeiling, facts(null));
    expect(refused.ok ? refused.value : refused.error).toEqual({
      code: "x402_pay_to_not_allowed",
      message: `the quote pays ${off}, whose mixed case is not its EIP-55 checksum, as a mistyped address's is not; nothing is signed for it`,
    });
  });

  it("takes a repeat's own entry, even one its policy now refuses", () => {
    const twoEntries = quote(entry(A, "40000"), entry(B, "5000"));
    const spent = facts(POLICY, usage({ dayUnits: 70_000n }));
    const chosen = chooseUnderPolicy(twoEntries, withCeiling, spent, { prefer: (index) => index === 0 });
    expect(chosen.ok && chosen.value.chosen.index).toBe(0);
    const fresh = chooseUnderPolicy(twoEntries, withCeiling, spent);
    expect(fresh.ok && fresh.value.chosen.index).toBe(1);
  });
});

describe("the check call's x402 decision", () => {
  const agent = {} as AuthenticatedAgent;
  const state = (document: AgentPolicyDocument | null, used = usage(), nodeFrozen = false): PolicyState => ({
    stored: document ? { document, policy: policyFromDocument(document), version: 1 } : null,
    usage: used,
    nodeFrozen,
  });
  const decide = createX402PolicyDecision(withCeiling, 5);

  it("allows, with no policy, what authorize signs today, and denies anything else by the node's code", () => {
    expect(decide(agent, state(null), quote(entry(PAIR, "10000")))).toEqual({ decision: "allow" });
    expect(decide(agent, state(null), quote(entry(A, "10000")))).toEqual({
      decision: "deny",
      rule: "node.x402_pay_to_not_allowed",
      remaining: "0",
    });
  });
  it("answers the policy's decision with one, and the node's count before it", () => {
    expect(decide(agent, state(POLICY), quote(entry(B, "20000")))).toMatchObject({
      decision: "deny",
      rule: `x402.payees[${B}].per_payment_units`,
      remaining: "10000",
    });
    expect(decide(agent, state(POLICY, usage({ dayCount: 5 })), quote(entry(A, "1")))).toMatchObject({
      rule: "node.x402_daily_limit",
    });
    expect(decide(agent, state(null, usage(), true), quote(entry(PAIR, "10000")))).toMatchObject({
      decision: "deny",
      rule: "node.frozen",
    });
  });
});
