import { getAddress } from "viem";
import { describe, expect, it } from "vitest";
import {
  type AgentPolicyDocument,
  agentPolicySchema,
  evaluateTransfer,
  evaluateX402,
  loosenings,
  mergePatch,
  NO_AGENT_POLICY,
  NO_USAGE,
  type PolicyUsage,
  policyFromDocument,
  policyToDocument,
  storedAgentPolicySchema,
} from "./agent-policy.ts";

const A = "0x00000000000000000000000000000000000000a1";
const B = "0x00000000000000000000000000000000000000b2";
const C = "0x00000000000000000000000000000000000000c3";
const NODE = { payTo: A, amountUnits: 10_000n };
const free = { nodeFrozen: false, approved: false };
const policy = (document: AgentPolicyDocument) => policyFromDocument(agentPolicySchema.parse(document));
const usage = (changes: {
  transfers?: Partial<PolicyUsage["transfers"]>;
  x402?: Partial<PolicyUsage["x402"]>;
}): PolicyUsage => ({
  transfers: { ...NO_USAGE.transfers, ...changes.transfers },
  x402: { ...NO_USAGE.x402, ...changes.x402 },
});

describe("the policy document", () => {
  it("round-trips through memory, keeping only what it sets, addresses lowercase", () => {
    const document = {
      transfers: { per_tx_units: "5", daily_count: 3, allow: [A], deny: [C] },
      x402: {
        payees: [{ pay_to: B, resource_prefix: "https://shop.example/", per_payment_units: "7" }],
        unknown_payee: "hold" as const,
      },
      approval_above_units: "9",
      frozen: true,
    };
    expect(policyToDocument(policy(document))).toEqual(document);
    expect(policyToDocument(NO_AGENT_POLICY)).toEqual({});
  });

  it("refuses an unknown field, a negative or fractional amount and a bad address", () => {
    expect(agentPolicySchema.safeParse({ transfer: {} }).success).toBe(false);
    expect(agentPolicySchema.safeParse({ transfers: { per_tx_units: "-1" } }).success).toBe(false);
    expect(agentPolicySchema.safeParse({ transfers: { per_tx_units: "1.5" } }).success).toBe(false);
    expect(agentPolicySchema.safeParse({ transfers: { per_tx_units: 5 } }).success).toBe(false);
    expect(agentPolicySchema.safeParse({ transfers: { allow: ["0x12"] } }).success).toBe(false);
  });

  it("refuses a resource prefix holding a control character, which a stored document written before the rule may still hold", () => {
    const payee = (resource_prefix: string) => ({
      x402: { payees: [{ pay_to: B, resource_prefix, per_payment_units: "7" }] },
    });
    for (const prefix of ["https://shop.example/\u0000", "https://shop.example/\u001b[2J", "\u007f"]) {
      expect(agentPolicySchema.safeParse(payee(prefix)).success, JSON.stringify(prefix)).toBe(false);
    }
    expect(storedAgentPolicySchema.safeParse(payee("https://shop.example/\u001b[2J")).success).toBe(true);
    expect(agentPolicySchema.safeParse(payee("https://shop.example/ä?q=1 2")).success).toBe(true);
  });
});

describe("a transfer against the policy", () => {
  it("allows what no rule bounds, and an agent without a policy is bounded by nothing here", () => {
    expect(evaluateTransfer(NO_AGENT_POLICY, NO_USAGE, { to: B, costUnits: 10n ** 12n }, free)).toEqual({
      decision: "allow",
    });
  });

  it("names each rule that denies, with what remains of its budget", () => {
    const limits = policy({
      transfers: { per_tx_units: "100", daily_units: "250", monthly_units: "1000", daily_count: 3 },
    });
    const at = (cost: bigint, used: PolicyUsage) =>
      evaluateTransfer(limits, used, { to: B, costUnits: cost }, free);
    expect(at(100n, NO_USAGE)).toEqual({ decision: "allow" });
    expect(at(101n, NO_USAGE)).toEqual({
      decision: "deny",
      rule: "transfers.per_tx_units",
      remaining: "100",
    });
    expect(at(60n, usage({ transfers: { dayUnits: 200n } }))).toEqual({
      decision: "deny",
      rule: "transfers.daily_units",
      remaining: "50",
    });
    expect(at(60n, usage({ transfers: { monthUnits: 950n } }))).toEqual({
      decision: "deny",
      rule: "transfers.monthly_units",
      remaining: "50",
    });
    expect(at(1n, usage({ transfers: { dayCount: 3 } }))).toEqual({
      decision: "deny",
      rule: "transfers.daily_count",
      remaining: "0",
    });
  });

  it("denies a recipient on the deny list or off the allow list, whatever the case of its letters", () => {
    const lists = policy({ transfers: { allow: [getAddress(B)], deny: [C] } });
    expect(evaluateTransfer(lists, NO_USAGE, { to: B, costUnits: 1n }, free)).toEqual({ decision: "allow" });
    expect(evaluateTransfer(lists, NO_USAGE, { to: C, costUnits: 1n }, free)).toMatchObject({
      rule: "transfers.deny",
    });
    expect(evaluateTransfer(lists, NO_USAGE, { to: A, costUnits: 1n }, free)).toMatchObject({
      rule: "transfers.allow",
    });
  });

  it("holds above the approval threshold unless approved, and a deny wins over the hold", () => {
    const held = policy({ approval_above_units: "50", transfers: { daily_units: "80" } });
    expect(evaluateTransfer(held, NO_USAGE, { to: B, costUnits: 51n }, free)).toEqual({
      decision: "hold",
      rule: "approval_above_units",
      remaining: null,
    });
    expect(evaluateTransfer(held, NO_USAGE, { to: B, costUnits: 51n }, { ...free, approved: true })).toEqual({
      decision: "allow",
    });
    expect(evaluateTransfer(held, NO_USAGE, { to: B, costUnits: 81n }, free)).toMatchObject({
      decision: "deny",
      rule: "transfers.daily_units",
    });
  });

  it("denies everything of a frozen agent or a frozen node, approved or not", () => {
    const approved = { nodeFrozen: false, approved: true };
    expect(
      evaluateTransfer(policy({ frozen: true }), NO_USAGE, { to: B, costUnits: 1n }, approved),
    ).toMatchObject({
      decision: "deny",
      rule: "frozen",
    });
    expect(
      evaluateTransfer(
        NO_AGENT_POLICY,
        NO_USAGE,
        { to: B, costUnits: 1n },
        { ...approved, nodeFrozen: true },
      ),
    ).toMatchObject({ decision: "deny", rule: "node.frozen" });
  });
});

describe("an x402 payment against the policy", () => {
  const sellers = policy({
    x402: {
      payees: [
        { pay_to: A, per_payment_units: "50000" },
        { pay_to: B, per_payment_units: "10000", daily_units: "15000" },
      ],
      daily_units: "100000",
      daily_count: 10,
    },
  });
  const pay = (payTo: string, amountUnits: bigint, used: PolicyUsage = NO_USAGE) =>
    evaluateX402(sellers, used, NODE, { payTo, amountUnits, resource: "https://shop.example/a" }, free);

  it("pays a listed payee within its per-payment limit, and names that payee's limit past it", () => {
    expect(pay(A, 40_000n)).toEqual({ decision: "allow" });
    expect(pay(B, 20_000n)).toEqual({
      decision: "deny",
      rule: `x402.payees[${B}].per_payment_units`,
      remaining: "10000",
    });
  });

  it("counts a payee's day, the policy's day in units and in authorizations", () => {
    expect(pay(B, 10_000n, usage({ x402: { payeeDayUnits: new Map([[B, 10_000n]]) } }))).toMatchObject({
      rule: `x402.payees[${B}].daily_units`,
      remaining: "5000",
    });
    expect(pay(A, 40_000n, usage({ x402: { dayUnits: 70_000n } }))).toMatchObject({
      rule: "x402.daily_units",
      remaining: "30000",
    });
    expect(pay(A, 1n, usage({ x402: { dayCount: 10 } }))).toMatchObject({ rule: "x402.daily_count" });
  });

  it("denies an unlisted payee, or holds it when the policy says so", () => {
    expect(pay(C, 1n)).toEqual({ decision: "deny", rule: "x402.payees", remaining: "0" });
    const holding = policy({ x402: { payees: [], unknown_payee: "hold" } });
    const request = { payTo: C, amountUnits: 1n, resource: null };
    expect(evaluateX402(holding, NO_USAGE, NODE, request, free)).toMatchObject({
      decision: "hold",
      rule: "x402.unknown_payee",
    });
    expect(evaluateX402(holding, NO_USAGE, NODE, request, { ...free, approved: true })).toEqual({
      decision: "allow",
    });
  });

  it("keeps the node's pair at its exact amount as the default list of one", () => {
    const none = NO_AGENT_POLICY;
    const at = (payTo: string, amountUnits: bigint) =>
      evaluateX402(none, NO_USAGE, NODE, { payTo, amountUnits, resource: null }, free);
    expect(at(A, 10_000n)).toEqual({ decision: "allow" });
    expect(at(A, 9_999n)).toMatchObject({ decision: "deny", rule: "x402.payees" });
    expect(at(B, 10_000n)).toMatchObject({ decision: "deny", rule: "x402.payees" });
  });

  it("applies a payee entry only to the resources its prefix begins, when the resource is known", () => {
    const scoped = policy({
      x402: { payees: [{ pay_to: A, resource_prefix: "https://a.example/api/", per_payment_units: "5" }] },
    });
    const at = (resource: string | null) =>
      evaluateX402(scoped, NO_USAGE, NODE, { payTo: A, amountUnits: 5n, resource }, free);
    expect(at("https://a.example/api/x")).toEqual({ decision: "allow" });
    expect(at("https://a.example/other")).toMatchObject({ decision: "deny", rule: "x402.payees" });
    expect(at(null)).toEqual({ decision: "allow" });
  });
});

describe("what loosens a policy", () => {
  const base = policy({
    transfers: { per_tx_units: "100", allow: [A, B], deny: [C] },
    x402: { payees: [{ pay_to: A, per_payment_units: "50", daily_units: "100" }], daily_count: 5 },
    approval_above_units: "60",
    frozen: true,
  });
  const change = (document: AgentPolicyDocument) => loosenings(base, policy(document), NODE);
  const same = policyToDocument(base);

  it("finds nothing in a change that only tightens", () => {
    expect(loosenings(base, base, NODE)).toEqual([]);
    expect(
      change({
        ...same,
        transfers: { per_tx_units: "10", allow: [A], deny: [C, B] },
        x402: { payees: [], daily_count: 1 },
        approval_above_units: "1",
      }),
    ).toEqual([]);
    expect(
      loosenings(NO_AGENT_POLICY, policy({ frozen: true, transfers: { daily_units: "0" } }), NODE),
    ).toEqual([]);
  });

  it("names each field a change loosens", () => {
    expect(change({ ...same, transfers: { ...same.transfers, per_tx_units: "101" } })).toEqual([
      "transfers.per_tx_units",
    ]);
    expect(
      change({ ...same, transfers: { per_tx_units: "100", allow: [A, B], deny: [C] }, frozen: false }),
    ).toEqual(["frozen"]);
    expect(change({ ...same, transfers: { per_tx_units: "100", allow: [A, B, C], deny: [] } })).toEqual([
      "transfers.allow",
      "transfers.deny",
    ]);
    expect(change({ ...same, approval_above_units: undefined })).toEqual(["approval_above_units"]);
    expect(change({ ...same, x402: { ...same.x402, unknown_payee: "hold" } })).toEqual([
      "x402.unknown_payee",
    ]);
    expect(change({})).toEqual([
      "transfers.per_tx_units",
      "transfers.allow",
      "transfers.deny",
      "x402.payees",
      "x402.daily_count",
      "approval_above_units",
      "frozen",
    ]);
  });

  it("counts a new payee, a higher per-payment figure or a dropped daily figure as loosening the payees", () => {
    const payees = (list: NonNullable<NonNullable<AgentPolicyDocument["x402"]>["payees"]>) =>
      change({ ...same, x402: { payees: list, daily_count: 5 } });
    expect(payees([{ pay_to: A, per_payment_units: "50", daily_units: "90" }])).toEqual([]);
    expect(payees([{ pay_to: B, per_payment_units: "1", daily_units: "1" }])).toEqual(["x402.payees"]);
    expect(payees([{ pay_to: A, per_payment_units: "51", daily_units: "100" }])).toEqual(["x402.payees"]);
    expect(payees([{ pay_to: A, per_payment_units: "50" }])).toEqual(["x402.payees"]);
  });

  it("counts a payee's wider or dropped resource prefix as loosening the payees, a narrower one as not", () => {
    const scoped = policy({
      x402: {
        payees: [{ pay_to: A, resource_prefix: "https://shop.example/paid/", per_payment_units: "50" }],
      },
    });
    const to = (prefix: string | undefined) =>
      loosenings(
        scoped,
        policy({
          x402: {
            payees: [
              {
                pay_to: A,
                per_payment_units: "50",
                ...(prefix === undefined ? {} : { resource_prefix: prefix }),
              },
            ],
          },
        }),
        NODE,
      );
    expect(to("https://shop.example/paid/reports/")).toEqual([]);
    expect(to("https://shop.example/")).toEqual(["x402.payees"]);
    expect(to(undefined)).toEqual(["x402.payees"]);
  });

  it("lets a first policy list the node's own payee at no more than its amount, and nothing else", () => {
    const first = (document: AgentPolicyDocument) => loosenings(NO_AGENT_POLICY, policy(document), NODE);
    expect(first({ x402: { payees: [{ pay_to: A, per_payment_units: "10000" }] } })).toEqual([]);
    expect(first({ x402: { payees: [{ pay_to: A, per_payment_units: "10001" }] } })).toEqual(["x402.payees"]);
    expect(first({ x402: { payees: [{ pay_to: B, per_payment_units: "1" }] } })).toEqual(["x402.payees"]);
  });
});

describe("the merge patch an agent sends", () => {
  it("merges objects, removes with null and replaces lists", () => {
    const current = { transfers: { per_tx_units: "10", allow: [A, B] }, frozen: false };
    expect(mergePatch(current, { transfers: { allow: [A] }, frozen: true })).toEqual({
      transfers: { per_tx_units: "10", allow: [A] },
      frozen: true,
    });
    // A `__proto__` field is a field like any other (the schema refuses it), never the prototype.
    const hostile = mergePatch({}, JSON.parse('{"__proto__": {"frozen": true}}'));
    expect(agentPolicySchema.safeParse(hostile).success).toBe(false);
    expect(mergePatch(current, { transfers: { per_tx_units: null } })).toEqual({
      transfers: { allow: [A, B] },
      frozen: false,
    });
  });
});
