/**
 * What `npm run enclave-policy` prints: an aligned table for a person, or the wire form (snake_case,
 * decimal strings, as get_policy answers) with --json. Limits, addresses and versions only.
 */
import { getPolicyResultToWire } from "../../origin/signer/op-codecs.ts";
import type { GetPolicyResult } from "../../origin/signer/types.ts";
import type { WireGetPolicyResult } from "../../shared/enclave-ops.ts";

type Row = [field: string, value: string];

/** Row order of every table, so before and after line up whatever each side holds. */
const ROW_ORDER = [
  "policy_version",
  "policy",
  "per_tx_limit_units",
  "daily_limit_units",
  "fee_ceiling_wei",
  "recipient_allowlist",
  "x402_amount_units",
  "x402_pay_to",
  "x402_max_timeout_seconds",
  "x402_validity_margin_seconds",
  "x402_daily_limit",
  "settler_daily_fee_units",
  "x402_max_per_payment_units",
  "x402_payees",
  "operator_pool",
  "treasury",
  "treasury.faucet_address",
  "treasury.faucet_key_ref",
  "treasury.budget_units",
  "treasury.spent_units",
  "treasury.payout_units",
  "treasury.cooldown_ms",
  "treasury.daily_limit_units",
  "settler",
  "settler.address",
  "settler.key_ref",
  "settler.fee_spent_today_units",
];

/** The rows of one sealed state: version, every policy field, the treasury and its terms, the settler. */
export function policyRows(result: GetPolicyResult): Row[] {
  const wire = getPolicyResultToWire(result);
  const rows: Row[] = [["policy_version", String(wire.policy_version)]];
  const policy = wire.policy;
  if (!policy) rows.push(["policy", "none sealed (the enclave signs no transfer and no payout)"]);
  else {
    rows.push(
      ["per_tx_limit_units", policy.per_tx_limit_units],
      ["daily_limit_units", policy.daily_limit_units],
      ["fee_ceiling_wei", policy.fee_ceiling_wei],
      [
        "recipient_allowlist",
        policy.recipient_allowlist === null
          ? "none (any recipient but the operator pool)"
          : policy.recipient_allowlist.join(",") || "(empty: no recipient)",
      ],
      ["x402_amount_units", policy.x402_amount_units ?? "none"],
      ["x402_pay_to", policy.x402_pay_to ?? "none"],
      ["x402_max_timeout_seconds", String(policy.x402_max_timeout_seconds)],
      ["x402_validity_margin_seconds", String(policy.x402_validity_margin_seconds)],
      ["x402_daily_limit", String(policy.x402_daily_limit)],
      ["settler_daily_fee_units", policy.settler_daily_fee_units],
      ["x402_max_per_payment_units", policy.x402_max_per_payment_units ?? "none (the x402 pair alone)"],
      [
        "x402_payees",
        policy.x402_payees == null ? "any" : policy.x402_payees.join(",") || "(empty: no payee)",
      ],
      ["operator_pool", policy.operator_pool],
    );
  }
  const treasury = wire.treasury;
  if (!treasury) rows.push(["treasury", "none configured"]);
  else {
    rows.push(
      ["treasury.faucet_address", treasury.faucet_address],
      ["treasury.faucet_key_ref", treasury.faucet_key_ref],
      ["treasury.budget_units", treasury.budget_units],
      ["treasury.spent_units", treasury.spent_units],
      // null: sealed before the enclave kept payout terms; it pays nothing until they are set.
      ["treasury.payout_units", treasury.payout_units ?? "none sealed (pays nothing)"],
      ["treasury.cooldown_ms", treasury.cooldown_ms === null ? "none sealed" : String(treasury.cooldown_ms)],
      ["treasury.daily_limit_units", treasury.daily_limit_units ?? "none sealed"],
    );
  }
  const settler = wire.settler;
  if (!settler) rows.push(["settler", "none configured (x402 settles nothing)"]);
  else {
    rows.push(
      ["settler.address", settler.settler_address],
      ["settler.key_ref", settler.settler_key_ref],
      ["settler.fee_spent_today_units", settler.fee_spent_today_units],
    );
  }
  // Every enclave since payee keys has one (made at init); an older one shows none.
  if (wire.payee) {
    rows.push(["payee.address", wire.payee.payee_address], ["payee.key_ref", wire.payee.payee_key_ref]);
  }
  return rows;
}

/** `show`: the sealed state as a two-column table. */
export function formatShow(result: GetPolicyResult): string {
  return [
    `enclave ${result.envId} on chain ${result.chainId}`,
    ...table([["field", "value"], ...policyRows(result)]),
  ]
    .join("\n")
    .concat("\n");
}

/** `apply` and `treasury`: before and after side by side; changed rows are marked with `*`. */
export function formatChange(title: string, before: GetPolicyResult, after: GetPolicyResult): string {
  const beforeRows = new Map(policyRows(before));
  const afterRows = new Map(policyRows(after));
  const fields = ROW_ORDER.filter((field) => beforeRows.has(field) || afterRows.has(field));
  const rows = fields.map((field): string[] => {
    const was = beforeRows.get(field) ?? "-";
    const now = afterRows.get(field) ?? "-";
    return [field, was, now, was === now ? "" : "*"];
  });
  return [
    `enclave ${after.envId} on chain ${after.chainId}: ${title}`,
    ...table([["field", "before", "after", ""], ...rows]),
  ]
    .join("\n")
    .concat("\n");
}

/** --json of `show`. */
export function showJson(result: GetPolicyResult): WireGetPolicyResult {
  return getPolicyResultToWire(result);
}

/** --json of `apply` and `treasury`. */
export function changeJson(
  before: GetPolicyResult,
  after: GetPolicyResult,
): { before: WireGetPolicyResult; after: WireGetPolicyResult } {
  return { before: getPolicyResultToWire(before), after: getPolicyResultToWire(after) };
}

function table(rows: string[][]): string[] {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? "").length)));
  return rows.map((row) =>
    row
      .map((cell, column) => (column === row.length - 1 ? cell : cell.padEnd(widths[column]!)))
      .join("  ")
      .trimEnd(),
  );
}
