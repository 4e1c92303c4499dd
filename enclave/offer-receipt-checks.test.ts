import { describe, expect, it } from "vitest";
import { NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";
import { checkOfferTerms, checkReceiptClaim, type OfferTerms } from "./offer-receipt-checks.ts";
import { type Policy, policyFromWire } from "./policy.ts";
import { RecentSettlements } from "./recent-settlements.ts";

const PAYEE = "0x00000000000000000000000000000000000000bb";
const PAYER = "0x00000000000000000000000000000000000000cc";
const policy: Policy = policyFromWire({
  per_tx_limit_units: "0",
  daily_limit_units: "0",
  recipient_allowlist: null,
  x402_amount_units: "10000",
  x402_pay_to: PAYEE,
  x402_max_timeout_seconds: 180,
  operator_pool: "0x00000000000000000000000000000000000000aa",
  fee_ceiling_wei: "1",
  x402_validity_margin_seconds: 6,
  x402_daily_limit: 1,
  settler_daily_fee_units: "1",
});
const terms: OfferTerms = {
  scheme: "exact",
  network: "eip155:77",
  asset: NATIVE_TRANSFER_AUTH_ADDRESS,
  payTo: PAYEE,
  amount: "10000",
  validForSeconds: 60,
};
const OFFER_TERMS = { code: "cap_exceeded", detail: "offer_terms" };

describe("checkOfferTerms", () => {
  it.each([
    ["the sealed terms", {}, null],
    ["the sealed maximum validity", { validForSeconds: 180 }, null],
    ["a mixed-case asset", { asset: NATIVE_TRANSFER_AUTH_ADDRESS.toUpperCase().replace("0X", "0x") }, null],
    ["another amount", { amount: "10001" }, OFFER_TERMS],
    ["another payTo", { payTo: PAYER }, OFFER_TERMS],
    ["another asset", { asset: PAYER }, OFFER_TERMS],
    ["another network", { network: "eip155:1" }, OFFER_TERMS],
    ["another scheme", { scheme: "upto" }, OFFER_TERMS],
    ["a validity over the sealed maximum", { validForSeconds: 181 }, OFFER_TERMS],
  ])("%s", (_name, change, expected) => {
    const refusal = checkOfferTerms(policy, 77, PAYEE, { ...terms, ...change });
    expect(refusal === null ? null : { code: refusal.code, detail: refusal.detail }).toEqual(expected);
  });

  it("refuses when the sealed payTo is not the payee key, and when no x402 terms are sealed", () => {
    expect(checkOfferTerms(policy, 77, PAYER, { ...terms, payTo: PAYER })?.detail).toBe("offer_terms");
    expect(checkOfferTerms(null, 77, PAYEE, terms)?.code).toBe("not_configured");
  });
});

describe("checkReceiptClaim", () => {
  const settlement = { payer: PAYER, payee: PAYEE, valueUnits: 10_000n, validBefore: 1_000n };
  it.each([
    ["a settlement to the payee by its payer", {}, null],
    ["an unknown settlement", { settlement: undefined }, "receipt_settlement"],
    ["another payer", { payer: PAYEE }, "receipt_settlement"],
    ["another network", { network: "eip155:1" }, "receipt_settlement"],
    ["a settlement to another payee", { settlement: { ...settlement, payee: PAYER } }, "receipt_settlement"],
  ])("%s", (_name, change, expected) => {
    const claim = {
      network: "eip155:77",
      payer: PAYER.toUpperCase().replace("0X", "0x"),
      settlement,
      ...change,
    };
    expect(checkReceiptClaim(77, PAYEE, claim)?.detail ?? null).toBe(expected);
  });
});

describe("RecentSettlements", () => {
  it("remembers a settlement until an hour after its validBefore, by hash in any case", () => {
    const record = new RecentSettlements();
    const entry = { payer: PAYER, payee: PAYEE, valueUnits: 1n, validBefore: 1_000n };
    record.record("0xAB", entry, 900n);
    expect(record.get("0xab", 4_600n)).toEqual(entry);
    expect(record.get("0xab", 4_601n)).toBeUndefined();
    // A later record prunes what has lapsed.
    record.record("0xcd", { ...entry, validBefore: 10_000n }, 5_000n);
    expect(record.get("0xab", 1_000n)).toBeUndefined();
    expect(record.get("0xcd", 5_000n)).toBeDefined();
  });
});
