import { declarePaymentIdentifierExtension, isValidPaymentId } from "@x402/extensions/payment-identifier";
import { describe, expect, it } from "vitest";
import { X402_REASONS } from "../reasons.ts";
import {
  PAYMENT_IDENTIFIER,
  PAYMENT_IDENTIFIER_DECLARATION,
  paymentFingerprint,
  paymentIdOf,
} from "./payment-identifier.ts";

const withInfo = (info: unknown) => ({ extensions: { [PAYMENT_IDENTIFIER]: { info } } });

describe("the payment-identifier extension, payee side", () => {
  it("declares exactly what the official declarePaymentIdentifierExtension(false) builds", () => {
    expect(PAYMENT_IDENTIFIER_DECLARATION).toEqual(declarePaymentIdentifierExtension(false));
  });

  it.each([
    ["no extensions", {}, {}],
    ["the declaration copied without an id", withInfo({ required: false }), {}],
    ["an id of 16", withInfo({ required: false, id: "a".repeat(16) }), { paymentId: "a".repeat(16) }],
    ["an id of 128", withInfo({ required: false, id: "A_-9".repeat(32) }), { paymentId: "A_-9".repeat(32) }],
    ["an id of 15", withInfo({ id: "a".repeat(15) }), { refused: X402_REASONS.invalidPaymentIdentifier }],
    ["an id of 129", withInfo({ id: "a".repeat(129) }), { refused: X402_REASONS.invalidPaymentIdentifier }],
    [
      "an id with a dot",
      withInfo({ id: "pay_0123456789.abcdef" }),
      { refused: X402_REASONS.invalidPaymentIdentifier },
    ],
    [
      "an id that is a number",
      withInfo({ id: 1234567890123456 }),
      { refused: X402_REASONS.invalidPaymentIdentifier },
    ],
    [
      "an extension without info",
      { extensions: { [PAYMENT_IDENTIFIER]: {} } },
      { refused: X402_REASONS.invalidPaymentIdentifier },
    ],
  ])("%s", (_name, envelope, expected) => {
    expect(paymentIdOf(envelope)).toEqual(expected);
    // The official rules agree on every id this accepts or refuses.
    const info = (envelope as { extensions?: Record<string, { info?: { id?: unknown } }> }).extensions?.[
      PAYMENT_IDENTIFIER
    ]?.info;
    if (typeof info?.id === "string") expect(isValidPaymentId(info.id)).toBe("paymentId" in expected);
  });

  it("fingerprints what is paid for and on which terms, whatever the key order", () => {
    const accepted = { scheme: "exact", amount: "10000", payTo: "0xab" };
    const base = paymentFingerprint({ resourceUrl: "https://x.example/77/x402/demo", accepted });
    expect(
      paymentFingerprint({
        resourceUrl: "https://x.example/77/x402/demo",
        accepted: { payTo: "0xab", amount: "10000", scheme: "exact" },
      }),
    ).toBe(base);
    expect(paymentFingerprint({ resourceUrl: "https://x.example/77/x402/demo?item=2", accepted })).not.toBe(
      base,
    );
    expect(
      paymentFingerprint({
        resourceUrl: "https://x.example/77/x402/demo",
        accepted: { ...accepted, amount: "1" },
      }),
    ).not.toBe(base);
  });
});
