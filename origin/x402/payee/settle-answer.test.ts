import { describe, expect, it } from "vitest";
import { X402_REASONS, type X402Reason } from "../reasons.ts";
import { respond, settlementStatusPath, settleStatus, withStatusPointer } from "./settle-answer.ts";

const PAYER = "0x1111111111111111111111111111111111111111";
const TX = `0x${"ab".repeat(32)}`;

describe("settleStatus: a settle that did not pay is never 200", () => {
  const cases: Array<[string, X402Reason | undefined, number]> = [
    ["settled", undefined, 200],
    ["broadcast, no receipt yet", X402_REASONS.settlementPending, 504],
    ["the chain out of reach", X402_REASONS.chainUnavailable, 503],
    ["the database out of reach", X402_REASONS.serviceUnavailable, 503],
    ["the signer did not sign", X402_REASONS.unexpectedSettleError, 503],
    ["a bad signature", X402_REASONS.signature, 400],
    ["a balance too low", X402_REASONS.insufficientBalance, 400],
    ["a nonce used", X402_REASONS.nonceUsed, 400],
    ["mined and reverted", X402_REASONS.transactionFailed, 400],
    ["never mined", X402_REASONS.broadcastRefused, 400],
    ["not a payment", X402_REASONS.invalidPayload, 400],
    ["another x402Version", X402_REASONS.invalidX402Version, 400],
  ];
  for (const [name, reason, status] of cases) {
    it(`${name}: ${status}`, () => {
      expect(settleStatus(respond(PAYER, TX, reason))).toBe(status);
    });
  }
  it("every reason but success answers something other than 200", () => {
    for (const reason of Object.values(X402_REASONS)) {
      expect(settleStatus(respond(PAYER, "", reason))).not.toBe(200);
    }
  });
});

describe("withStatusPointer", () => {
  const url = `https://wallet.example.com/77${settlementStatusPath(PAYER.toUpperCase().replace("0X", "0x"), `0x${"CD".repeat(32)}`)}`;

  it("names the status path in lower case", () => {
    expect(url).toBe(
      `https://wallet.example.com/77/x402/facilitator/settlements/${PAYER}/0x${"cd".repeat(32)}`,
    );
  });

  it("gives a settlement_pending answer the status URL beside its transaction", () => {
    const pointed = withStatusPointer(respond(PAYER, TX, X402_REASONS.settlementPending), url);
    expect(pointed).toMatchObject({ success: false, transaction: TX, extra: { statusUrl: url } });
    expect(pointed.errorMessage).toContain(TX);
    expect(pointed.errorMessage).toContain(url);
  });

  it("leaves every other answer as it is", () => {
    for (const answer of [respond(PAYER, TX), respond(PAYER, "", X402_REASONS.nonceUsed)]) {
      expect(withStatusPointer(answer, url)).toEqual(answer);
    }
  });
});
