import { describe, expect, it } from "vitest";
import {
  AGENT_POLICY_REFUSAL_DETAILS,
  FAUCET_REFUSAL_DETAILS,
  FILLER_REFUSAL_DETAILS,
  KEY_REFUSAL_DETAILS,
  OFFER_RECEIPT_REFUSAL_DETAILS,
  OPERATOR_REFUSAL_DETAILS,
  REFUSAL_DETAILS,
  SETTLEMENT_REFUSAL_DETAILS,
  TRANSACTION_REFUSAL_DETAILS,
  TRANSFER_REFUSAL_DETAILS,
  X402_AUTHORIZATION_REFUSAL_DETAILS,
} from "./enclave-protocol.ts";

describe("refusal details", () => {
  it("are partitioned by domain: each detail in one group, and the full list is the groups'", () => {
    const groups = [
      TRANSFER_REFUSAL_DETAILS,
      TRANSACTION_REFUSAL_DETAILS,
      FAUCET_REFUSAL_DETAILS,
      X402_AUTHORIZATION_REFUSAL_DETAILS,
      SETTLEMENT_REFUSAL_DETAILS,
      OFFER_RECEIPT_REFUSAL_DETAILS,
      FILLER_REFUSAL_DETAILS,
      KEY_REFUSAL_DETAILS,
      AGENT_POLICY_REFUSAL_DETAILS,
      OPERATOR_REFUSAL_DETAILS,
    ];
    const grouped = groups.flat();
    expect(new Set(grouped).size).toBe(grouped.length);
    expect([...REFUSAL_DETAILS].sort()).toEqual([...grouped].sort());
  });
});
