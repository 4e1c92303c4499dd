import { describe, expect, it } from "vitest";
import {
  type AgentPolicyDocument,
  agentPolicySchema,
  policyFromDocument,
} from "../../shared/agent-policy.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import type { WalletGateRow } from "../funding/gate.ts";
import type { AuthenticatedAgent } from "../http/env.ts";
import { faucetOperation } from "./faucet.ts";
import type { MoneyServices } from "./money-services.ts";
import { type CheckFacts, isHeld, isNotNow, type Refusal, type Stop } from "./operation.ts";
import { transferOperation } from "./transfers.ts";

// The money rules as the outbox's batch runner applies them (operation.check), over the facts it
// read under its locks: no database, no chain, no enclave. Each row names the rule that decides.

const NOW = new Date("2026-11-26T12:00:00.000Z");
const WALLET = "0x1111111111111111111111111111111111111111";
const AGENT: AuthenticatedAgent = {
  agentId: "00000000-0000-4000-8000-000000000001",
  assignedWallet: WALLET,
  keyRef: "key-1",
  capabilities: [],
  hasPolicy: false,
};
const FEES = { maxFeePerGas: 2_000_000_000n, maxPriorityFeePerGas: 1_000_000_000n, gasLimit: 21_000n };
/** A wallet the gate lets move anything: restored by a drill. */
const OPEN_GATE: WalletGateRow = {
  enabled: true,
  revoked: false,
  verified: true,
  batch_status: "available",
  restored: true,
  ceiling_units: null,
};
const units = (n: bigint): bigint => n * WEI_PER_UNIT;

function services(): Pick<MoneyServices, "config" | "clock"> {
  return {
    config: {
      transfers: {
        perTxLimitUnits: 1_000n,
        dailyLimitUnits: 2_500n,
        recipientAllowlist: undefined,
        holdSeconds: 60,
      },
      faucet: { payoutUnits: 100n, cooldownMs: 60_000, dailyLimitUnits: 250n },
    } as MoneyServices["config"],
    clock: { now: () => NOW },
  };
}

/** The facts of an operation of `valueUnits`: fees priced as the batch runner prices them. */
function facts(valueUnits: bigint, overrides: Partial<CheckFacts> = {}): CheckFacts {
  const feeWei = FEES.gasLimit * FEES.maxFeePerGas;
  const costWei = units(valueUnits) + feeWei;
  return {
    sender: { minedNonce: 0n, balanceWei: units(1_000_000n) },
    fees: FEES,
    costWei,
    costUnits: (costWei + WEI_PER_UNIT - 1n) / WEI_PER_UNIT,
    inFlightWei: 0n,
    transferSpentUnits: 0n,
    faucet: { totalTodayUnits: 0n, sinceLastMs: null },
    senderGate: OPEN_GATE,
    // An outside address: not one of the service's wallets.
    recipientGate: null,
    recipientBalanceWei: undefined,
    policy: null,
    nodeFrozen: false,
    now: NOW,
    ...overrides,
  };
}

/** What a refusal comes to, as the agent reads it: its code and the field that says why. */
function decided(stop: Stop | null): string | null {
  if (!stop) return null;
  if (isHeld(stop)) return `held:${stop.held.rule}`;
  if (isNotNow(stop)) return `not_now:${stop.notNow.code}`;
  const why = stop.fields?.limit ?? stop.fields?.reason ?? stop.fields?.rule;
  return why === undefined ? stop.code : `${stop.code}:${why}`;
}

/** The refusal a check answered (a hold, or not now, fails the test). */
function refusal(stop: Stop | null): Refusal | null {
  if (stop && isHeld(stop)) throw new Error(`held by ${stop.held.rule}, not refused`);
  if (stop && isNotNow(stop)) throw new Error(`not now (${stop.notNow.code}), not refused`);
  return stop;
}

describe("transfer rules: the per-transaction limit, the daily limit, the balance, the funding gate", () => {
  const check = (valueUnits: bigint, overrides: Partial<CheckFacts> = {}): string | null => {
    const operation = transferOperation(services(), {
      actionId: "a",
      agent: AGENT,
      to: "0x2222222222222222222222222222222222222222",
      amount: valueUnits,
    });
    return decided(operation.check(facts(valueUnits, overrides)));
  };
  // The maximum fee is 21000 gas at 2 gwei, 42e12 wei: 42 units of 1e12 wei. A cost is value + 42.
  const cases: Array<[string, bigint, Partial<CheckFacts>, string | null]> = [
    ["well within every rule", 100n, {}, null],
    ["value plus fee exactly the per-transaction limit", 958n, {}, null],
    ["value plus fee one unit over the per-transaction limit", 959n, {}, "limit_exceeded:per_transaction"],
    ["today's spend plus this one exactly the daily limit", 900n, { transferSpentUnits: 1_558n }, null],
    [
      "today's spend plus this one a unit over the daily limit",
      900n,
      { transferSpentUnits: 1_559n },
      "limit_exceeded:daily",
    ],
    [
      "the per-transaction limit is checked before the daily one",
      2_000n,
      { transferSpentUnits: 2_500n },
      "limit_exceeded:per_transaction",
    ],
    [
      "a balance that covers exactly value plus maximum fee",
      100n,
      { sender: { minedNonce: 0n, balanceWei: units(142n) } },
      null,
    ],
    [
      "a balance a wei short",
      100n,
      { sender: { minedNonce: 0n, balanceWei: units(142n) - 1n } },
      "insufficient_funds",
    ],
    [
      "a balance that would cover it but for what is in flight",
      100n,
      { sender: { minedNonce: 0n, balanceWei: units(200n) }, inFlightWei: units(59n) },
      "insufficient_funds",
    ],
    [
      "a wallet that is not the service's",
      100n,
      { senderGate: null },
      "funding_gate_closed:batch_not_backed_up",
    ],
    [
      "a disabled identity",
      100n,
      { senderGate: { ...OPEN_GATE, enabled: false } },
      "funding_gate_closed:identity_disabled",
    ],
    [
      "no restore drill and no exception",
      100n,
      { senderGate: { ...OPEN_GATE, restored: false } },
      "funding_gate_closed:no_restore_evidence",
    ],
    [
      "the gate judges the balance left after the move: under an exception's ceiling",
      100n,
      {
        sender: { minedNonce: 0n, balanceWei: units(1_142n) },
        senderGate: { ...OPEN_GATE, restored: false, ceiling_units: "1000" },
      },
      null,
    ],
    [
      "the gate judges the balance left after the move: a wei over the ceiling",
      100n,
      {
        sender: { minedNonce: 0n, balanceWei: units(1_142n) + 1n },
        senderGate: { ...OPEN_GATE, restored: false, ceiling_units: "1000" },
      },
      "funding_gate_closed:ceiling_exceeded",
    ],
  ];
  for (const [name, value, overrides, expected] of cases) {
    it(name, () => {
      expect(check(value, overrides)).toBe(expected);
    });
  }

  it("says how much of the day's limit remains", () => {
    const operation = transferOperation(services(), {
      actionId: "a",
      agent: AGENT,
      to: WALLET,
      amount: 900n,
    });
    expect(refusal(operation.check(facts(900n, { transferSpentUnits: 2_000n })))?.fields).toEqual({
      limit: "daily",
      limit_units: "2500",
      remaining_units: "500",
    });
  });

  // The cost of 100 units is 142 units (a 42e12 wei maximum fee). Mutation: rounding the
  // available balance up (or the need down) fails the fractional rows; dropping needed_units and
  // available_units fails every row.
  it.each([
    ["a balance a wei short of 142 units", units(142n) - 1n, 0n, "141"],
    ["half a unit, less what is in flight", units(100n) + 500_000_000_000n, units(10n), "90"],
    ["in flight above the balance: nothing available", units(50n), units(60n), "0"],
  ])("insufficient_funds in units: %s", (_name, balanceWei, inFlightWei, availableUnits) => {
    const operation = transferOperation(services(), {
      actionId: "a",
      agent: AGENT,
      to: WALLET,
      amount: 100n,
    });
    const refused = refusal(
      operation.check(facts(100n, { sender: { minedNonce: 0n, balanceWei }, inFlightWei })),
    );
    expect(refused?.fields).toEqual({
      needed_units: "142",
      available_units: availableUnits,
      needed_wei: units(142n).toString(),
      available_wei: (balanceWei - inFlightWei).toString(),
    });
    expect(refused?.message).toContain(`needs 142 units and has ${availableUnits} available`);
  });
});

describe("transfer rules: the recipient's funding gate, when it is one of the service's wallets", () => {
  const TO = "0x2222222222222222222222222222222222222222";
  const UNDRILLED = { ...OPEN_GATE, restored: false };
  const transfer = (to: string, value: bigint) =>
    transferOperation(services(), { actionId: "a", agent: AGENT, to, amount: value });
  const check = (valueUnits: bigint, overrides: Partial<CheckFacts>): string | null =>
    decided(transfer(TO, valueUnits).check(facts(valueUnits, overrides)));
  // Mutation: dropping the recipient's gate from the transfer check lets every refusal row through;
  // gating a recipient that is not the service's (evaluateWalletGate(null) refuses) fails the first.
  const cases: Array<[string, bigint, Partial<CheckFacts>, string | null]> = [
    ["an outside address: not the service's to gate", 100n, { recipientGate: null }, null],
    ["a drilled agent wallet", 100n, { recipientGate: OPEN_GATE }, null],
    [
      "an agent wallet no drill has reproduced, without an exception (zero_only)",
      100n,
      { recipientGate: UNDRILLED },
      "funding_gate_closed:no_restore_evidence",
    ],
    [
      "a disabled agent",
      100n,
      { recipientGate: { ...OPEN_GATE, enabled: false } },
      "funding_gate_closed:identity_disabled",
    ],
    [
      "an agent whose custody the enclave has not proven",
      100n,
      { recipientGate: { ...OPEN_GATE, verified: false } },
      "funding_gate_closed:identity_not_verified",
    ],
    [
      "an agent whose key batch has no verified backup",
      100n,
      { recipientGate: { ...OPEN_GATE, batch_status: "backup_written" } },
      "funding_gate_closed:batch_not_backed_up",
    ],
    [
      "under a ceiling: what it holds plus the amount exactly at it",
      100n,
      { recipientGate: { ...UNDRILLED, ceiling_units: "1000" }, recipientBalanceWei: units(900n) },
      null,
    ],
    [
      "under a ceiling: a wei over it",
      100n,
      { recipientGate: { ...UNDRILLED, ceiling_units: "1000" }, recipientBalanceWei: units(900n) + 1n },
      "funding_gate_closed:ceiling_exceeded",
    ],
    [
      "under a ceiling, the chain having given no balance: not now, nothing decided",
      100n,
      { recipientGate: { ...UNDRILLED, ceiling_units: "1000" }, recipientBalanceWei: undefined },
      "not_now:chain_unavailable",
    ],
    [
      "the sender's gate is weighed first",
      100n,
      { senderGate: UNDRILLED, recipientGate: { ...OPEN_GATE, enabled: false } },
      "funding_gate_closed:no_restore_evidence",
    ],
    [
      "the recipient's gate refuses before the policy holds",
      100n,
      {
        recipientGate: UNDRILLED,
        policy: {
          policy: policyFromDocument(agentPolicySchema.parse({ approval_above_units: "1" })),
          usage: { dayUnits: 0n, monthUnits: 0n, dayCount: 0 },
        },
      },
      "funding_gate_closed:no_restore_evidence",
    ],
  ];
  for (const [name, value, overrides, expected] of cases) {
    it(name, () => {
      expect(check(value, overrides)).toBe(expected);
    });
  }

  it("names the recipient's wallet in the message, with the gate's own reason", () => {
    const refused = refusal(transfer(TO, 100n).check(facts(100n, { recipientGate: UNDRILLED })));
    expect(refused).toMatchObject({
      code: "funding_gate_closed",
      fields: { reason: "no_restore_evidence" },
      message: expect.stringMatching(
        /^the recipient is another wallet of this service, and it may not receive/,
      ),
    });
  });

  it("gates a transfer to the sender's own wallet once, as the sender: nothing enters it but its own value", () => {
    // 1,142 units under a 1,000-unit ceiling: 100 out (142 with the fee) leaves it at the ceiling
    // as the sender. Weighed again as a recipient, its balance plus the amount would be over it.
    const ceilinged = { ...UNDRILLED, ceiling_units: "1000" };
    const self = {
      sender: { minedNonce: 0n, balanceWei: units(1_142n) },
      senderGate: ceilinged,
      recipientGate: ceilinged,
      recipientBalanceWei: units(1_142n),
    };
    expect(decided(transfer(WALLET, 100n).check(facts(100n, self)))).toBeNull();
    expect(decided(transfer(TO, 100n).check(facts(100n, self)))).toBe("funding_gate_closed:ceiling_exceeded");
  });
});

describe("transfer rules: the agent's spending policy after the node's limits, its hold after everything else", () => {
  const TO = "0x2222222222222222222222222222222222222222";
  const withPolicy = (
    document: AgentPolicyDocument,
    used: Partial<{ dayUnits: bigint; monthUnits: bigint; dayCount: number }> = {},
  ): Partial<CheckFacts> => ({
    policy: {
      policy: policyFromDocument(agentPolicySchema.parse(document)),
      usage: { dayUnits: 0n, monthUnits: 0n, dayCount: 0, ...used },
    },
  });
  const check = (valueUnits: bigint, overrides: Partial<CheckFacts>, approved = false): string | null =>
    decided(
      transferOperation(services(), {
        actionId: "a",
        agent: AGENT,
        to: TO,
        amount: valueUnits,
        approved,
      }).check(facts(valueUnits, overrides)),
    );
  // A cost is value + 42 units of maximum fee.
  it.each<[string, bigint, Partial<CheckFacts>, string | null]>([
    ["no policy, the node not frozen", 100n, {}, null],
    ["a frozen node, with no policy", 100n, { nodeFrozen: true }, "policy_denied:node.frozen"],
    ["a frozen agent", 100n, withPolicy({ frozen: true }), "policy_denied:frozen"],
    [
      "within the policy's per-transaction figure",
      58n,
      withPolicy({ transfers: { per_tx_units: "100" } }),
      null,
    ],
    [
      "a unit over it, counting the fee",
      59n,
      withPolicy({ transfers: { per_tx_units: "100" } }),
      "policy_denied:transfers.per_tx_units",
    ],
    [
      "the month spent",
      100n,
      withPolicy({ transfers: { monthly_units: "1000" } }, { monthUnits: 900n }),
      "policy_denied:transfers.monthly_units",
    ],
    [
      "the day's count used",
      1n,
      withPolicy({ transfers: { daily_count: 2 } }, { dayCount: 2 }),
      "policy_denied:transfers.daily_count",
    ],
    [
      "a recipient on the deny list",
      1n,
      withPolicy({ transfers: { deny: [TO] } }),
      "policy_denied:transfers.deny",
    ],
    [
      "above the approval threshold",
      100n,
      withPolicy({ approval_above_units: "100" }),
      "held:approval_above_units",
    ],
    [
      "above the threshold, but the node's daily limit refuses first",
      100n,
      { ...withPolicy({ approval_above_units: "100" }), transferSpentUnits: 2_400n },
      "limit_exceeded:daily",
    ],
    [
      "above the threshold, but the wallet cannot pay (a deny wins over a hold)",
      100n,
      { ...withPolicy({ approval_above_units: "100" }), sender: { minedNonce: 0n, balanceWei: units(10n) } },
      "insufficient_funds",
    ],
  ])("%s", (_name, value, overrides, expected) => {
    expect(check(value, overrides)).toBe(expected);
  });

  it("signs an approved transfer above the threshold, and still refuses it past a budget", () => {
    expect(check(100n, withPolicy({ approval_above_units: "100" }), true)).toBeNull();
    expect(
      check(100n, withPolicy({ approval_above_units: "100", transfers: { daily_units: "100" } }), true),
    ).toBe("policy_denied:transfers.daily_units");
  });

  it("holds for the node's hold time, and names what remains in a denial", () => {
    const operation = transferOperation(services(), { actionId: "a", agent: AGENT, to: TO, amount: 100n });
    expect(operation.check(facts(100n, withPolicy({ approval_above_units: "1" })))).toEqual({
      held: { rule: "approval_above_units", holdSeconds: 60 },
    });
    expect(
      refusal(
        operation.check(facts(100n, withPolicy({ transfers: { daily_units: "500" } }, { dayUnits: 400n }))),
      )?.fields,
    ).toEqual({ rule: "transfers.daily_units", remaining: "100" });
  });
});

describe("faucet rules: the cooldown, the daily limit, the treasury, the receiving wallet's gate", () => {
  const treasury = { address: "0x3333333333333333333333333333333333333333", keyRef: "treasury" };
  // The treasury is not an agent wallet (no sender gate); the payout's wallet is the agent's.
  const payoutFacts = (overrides: Partial<CheckFacts>): CheckFacts =>
    facts(100n, { senderGate: null, recipientGate: OPEN_GATE, ...overrides });
  const check = (overrides: Partial<CheckFacts>): Refusal | null =>
    refusal(
      faucetOperation(services(), { actionId: "a", agent: AGENT, treasury }).check(payoutFacts(overrides)),
    );
  const cases: Array<[string, Partial<CheckFacts>, string | null]> = [
    ["a first payout", {}, null],
    ["the cooldown just over", { faucet: { totalTodayUnits: 100n, sinceLastMs: 60_000 } }, null],
    [
      "a millisecond inside the cooldown",
      { faucet: { totalTodayUnits: 100n, sinceLastMs: 59_999 } },
      "faucet_cooldown",
    ],
    [
      "today's payouts plus this one exactly the daily limit",
      { faucet: { totalTodayUnits: 150n, sinceLastMs: null } },
      null,
    ],
    [
      "today's payouts plus this one over the daily limit",
      { faucet: { totalTodayUnits: 151n, sinceLastMs: null } },
      "faucet_daily_limit",
    ],
    [
      "inside the cooldown with the day's units spent: the day refuses at the cooldown's end",
      { faucet: { totalTodayUnits: 200n, sinceLastMs: 59_999 } },
      "faucet_daily_limit",
    ],
    [
      "inside the cooldown with the day's units spent, the cooldown ending after midnight",
      { faucet: { totalTodayUnits: 200n, sinceLastMs: 0 }, now: new Date("2026-01-01T23:59:30Z") },
      "faucet_cooldown",
    ],
    [
      "a treasury that cannot pay value plus maximum fee",
      { sender: { minedNonce: 0n, balanceWei: units(142n) - 1n } },
      "funding_gate_closed:treasury_low",
    ],
    [
      "a treasury short only for what is in flight",
      { sender: { minedNonce: 0n, balanceWei: units(200n) }, inFlightWei: units(59n) },
      "funding_gate_closed:treasury_low",
    ],
    [
      "the receiving wallet's gate: its balance after the payout within the ceiling",
      {
        recipientGate: { ...OPEN_GATE, restored: false, ceiling_units: "150" },
        recipientBalanceWei: units(50n),
      },
      null,
    ],
    [
      "the receiving wallet's gate: a wei over the ceiling after the payout",
      {
        recipientGate: { ...OPEN_GATE, restored: false, ceiling_units: "150" },
        recipientBalanceWei: units(50n) + 1n,
      },
      "funding_gate_closed:ceiling_exceeded",
    ],
    [
      "the receiving wallet unverified",
      { recipientGate: { ...OPEN_GATE, verified: false } },
      "funding_gate_closed:identity_not_verified",
    ],
    [
      "a receiving wallet that is not the service's",
      { recipientGate: null },
      "funding_gate_closed:batch_not_backed_up",
    ],
  ];
  for (const [name, overrides, expected] of cases) {
    it(name, () => {
      expect(decided(check(overrides))).toBe(expected);
    });
  }

  it("answers not now, deciding nothing, when the chain gave no balance of a receiving wallet under a ceiling", () => {
    const stop = faucetOperation(services(), { actionId: "a", agent: AGENT, treasury }).check(
      payoutFacts({ recipientGate: { ...OPEN_GATE, restored: false, ceiling_units: "150" } }),
    );
    expect(decided(stop)).toBe("not_now:chain_unavailable");
  });

  it("tells the agent when to come back: the rest of the cooldown, rounded up", () => {
    const refusal = check({ faucet: { totalTodayUnits: 100n, sinceLastMs: 58_500 } });
    expect(refusal?.fields).toEqual({ retry_after: 2 });
    expect(refusal?.headers).toEqual({ "Retry-After": "2" });
  });

  it("tells the agent when the UTC day turns after the daily limit", () => {
    const refusal = check({ faucet: { totalTodayUnits: 250n, sinceLastMs: null } });
    expect(refusal?.fields).toEqual({ retry_after: 12 * 3600 });
  });
});
