/**
 * What each agent key with a sealed policy has used of its policy's windows (UTC day and month of
 * the enclave's clock), counted from when the key got its policy, gross: nothing is ever given
 * back (docs/enclave.md#agent-policies-operator-keys-and-approvals). A key without a policy has no
 * record at all, so the sealed state of a node without agent policies does not grow.
 */
import type { AgentPolicy, AgentPolicyDocument, PolicyUsage } from "../shared/agent-policy.ts";
import { countsAt } from "./policy-checks.ts";

export type AgentUsage = {
  /** The UTC day the day figures count. */
  day: string;
  /** The UTC month the month figure counts. */
  month: string;
  transfers: { dayUnits: bigint; monthUnits: bigint; dayCount: number };
  x402: { dayUnits: bigint; dayCount: number; payeeDayUnits: Map<string, bigint> };
};

/** One agent key's sealed policy (null once removed, the version kept) and its usage. */
export type AgentPolicyRecord = {
  document: AgentPolicyDocument | null;
  policy: AgentPolicy | null;
  /** +1 on every accepted set_agent_policy of the key. */
  version: number;
  usage: AgentUsage;
};

export function emptyUsage(day: string, month: string): AgentUsage {
  return {
    day,
    month,
    transfers: { dayUnits: 0n, monthUnits: 0n, dayCount: 0 },
    x402: { dayUnits: 0n, dayCount: 0, payeeDayUnits: new Map() },
  };
}

/** The usage as of `day` and `month`: a figure of an earlier window reads as zero (policy-checks.ts countsAt). */
export function usageOn(usage: AgentUsage, day: string, month: string): PolicyUsage {
  const sameDay = countsAt(usage.day, day);
  return {
    transfers: {
      dayUnits: sameDay ? usage.transfers.dayUnits : 0n,
      monthUnits: countsAt(usage.month, month) ? usage.transfers.monthUnits : 0n,
      dayCount: sameDay ? usage.transfers.dayCount : 0,
    },
    x402: sameDay ? usage.x402 : { dayUnits: 0n, dayCount: 0, payeeDayUnits: new Map() },
  };
}

/** Moves `usage` on to `day` and `month`, zeroing the figures of the windows that ended; never back. */
function roll(usage: AgentUsage, day: string, month: string): void {
  if (!countsAt(usage.month, month)) {
    usage.month = month;
    usage.transfers.monthUnits = 0n;
  }
  if (!countsAt(usage.day, day)) {
    usage.day = day;
    usage.transfers.dayUnits = 0n;
    usage.transfers.dayCount = 0;
    usage.x402 = { dayUnits: 0n, dayCount: 0, payeeDayUnits: new Map() };
  }
}

/**
 * Counts a transfer's cost (value plus maximum fee) against the day and month; `count` is false
 * for a filler, whose fee counts in the budgets but which is no transfer of the daily count.
 */
export function countTransfer(
  usage: AgentUsage,
  at: { day: string; month: string },
  units: bigint,
  count: boolean,
): void {
  roll(usage, at.day, at.month);
  usage.transfers.dayUnits += units;
  usage.transfers.monthUnits += units;
  if (count) usage.transfers.dayCount += 1;
}

/** Counts one x402 authorization against the day, in total and for its payee. */
export function countX402(
  usage: AgentUsage,
  at: { day: string; month: string },
  payTo: string,
  units: bigint,
): void {
  roll(usage, at.day, at.month);
  const payee = payTo.toLowerCase();
  usage.x402.dayUnits += units;
  usage.x402.dayCount += 1;
  usage.x402.payeeDayUnits.set(payee, (usage.x402.payeeDayUnits.get(payee) ?? 0n) + units);
}
