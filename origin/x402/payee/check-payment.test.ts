import { secp256k1 } from "@noble/curves/secp256k1";
import { describe, expect, it } from "vitest";
import { transferWithAuthorizationDigest } from "../../../shared/eip712.ts";
import { fromHex, type Hex, toHex } from "../../../shared/hex.ts";
import { addressOfPublicKey, publicKeyOf, signDigest } from "../../../shared/secp256k1.ts";
import { X402_REASONS } from "../reasons.ts";
import type { Authorization, PaymentEnvelope } from "./payment.ts";
import { demoRequirements, type PaymentRequirements } from "./requirements.ts";
import {
  type CheckContext,
  checkClosedPayment,
  checkPayment,
  compareRequirements,
  PAYER_CLOCK_AHEAD_SECONDS,
} from "./verify.ts";

// The x402 rules that need neither the database nor the chain (verify.ts): the requirement the
// client accepted against ours, field by field, then the envelope: version, recipient, value,
// window, signature, payer. Each row changes one thing of a valid payment and names the reason.

const NOW = 1_800_000_000n;
// Letters in it, so its letter case can differ.
const PAY_TO = `0x4020${"0".repeat(31)}abcde` as const;
const OURS = demoRequirements({ amountUnits: 10_000n, payTo: PAY_TO, maxTimeoutSeconds: 180 });
const PAYER_KEY = fromHex(`0x${"11".repeat(32)}`);
const PAYER = addressOfPublicKey(publicKeyOf(PAYER_KEY)).toLowerCase() as Hex;
const CONTEXT: CheckContext = {
  nowSeconds: NOW,
  marginSeconds: 6n,
  maxValiditySeconds: 180n,
  operatorPool: "0x9999999999999999999999999999999999999999",
};

function envelope(change: {
  authorization?: Partial<Authorization>;
  accepted?: Record<string, unknown>;
  x402Version?: number;
  signWith?: Uint8Array;
  signature?: Hex;
}): PaymentEnvelope {
  const authorization: Authorization = {
    from: PAYER,
    to: PAY_TO,
    value: 10_000n,
    validAfter: 0n,
    validBefore: NOW + 60n,
    nonce: `0x${"ab".repeat(32)}`,
    ...change.authorization,
  };
  const digest = fromHex(transferWithAuthorizationDigest(authorization));
  const signature = change.signature ?? signDigest(digest, change.signWith ?? PAYER_KEY).signature;
  return {
    x402Version: change.x402Version ?? 2,
    resource: { url: "https://example.test/paid" },
    accepted: change.accepted ?? { ...OURS },
    authorization,
    signature,
    raw: {},
  };
}

/** The same signature with S replaced by n - S: valid for the same signer, but not low-S. */
function highS(signature: Hex): Hex {
  const bytes = fromHex(signature);
  const s = BigInt(toHex(bytes.subarray(32, 64)));
  const twin = (secp256k1.CURVE.n - s).toString(16).padStart(64, "0");
  const v = bytes[64] === 27 ? 28 : 27;
  return `${toHex(bytes.subarray(0, 32))}${twin}${v.toString(16)}` as Hex;
}

describe("compareRequirements: the requirement the client accepted, field by field", () => {
  const cases: Array<[string, Record<string, unknown>, string | null]> = [
    ["ours, as we sent it", { ...OURS }, null],
    ["payTo in other letter case", { ...OURS, payTo: PAY_TO.toUpperCase().replace("0X", "0x") }, null],
    ["asset in other letter case", { ...OURS, asset: OURS.asset.toUpperCase().replace("0X", "0x") }, null],
    ["another scheme", { ...OURS, scheme: "upto" }, X402_REASONS.scheme],
    ["another network", { ...OURS, network: "eip155:1" }, X402_REASONS.networkMismatch],
    [
      "another asset",
      { ...OURS, asset: "0x0000000000000000000000000000000000000001" },
      X402_REASONS.assetMismatch,
    ],
    ["no asset", { ...OURS, asset: undefined }, X402_REASONS.assetMismatch],
    [
      "another payTo",
      { ...OURS, payTo: "0x0000000000000000000000000000000000000002" },
      X402_REASONS.recipientMismatch,
    ],
    ["another amount", { ...OURS, amount: "9999" }, X402_REASONS.valueMismatch],
    ["the amount as a number, not a string", { ...OURS, amount: 10_000 }, X402_REASONS.valueMismatch],
    ["another timeout", { ...OURS, maxTimeoutSeconds: 61 }, X402_REASONS.invalidPaymentRequirements],
    [
      "the scheme is weighed first",
      { ...OURS, scheme: "upto", network: "eip155:1", amount: "1" },
      X402_REASONS.scheme,
    ],
  ];
  for (const [name, given, reason] of cases) {
    it(name, () => {
      expect(compareRequirements(given, OURS as PaymentRequirements)).toBe(reason);
    });
  }
});

describe("checkPayment: the envelope against our one requirement", () => {
  const otherKey = fromHex(`0x${"22".repeat(32)}`);
  const cases: Array<[string, PaymentEnvelope, CheckContext, string | null]> = [
    ["a valid payment", envelope({}), CONTEXT, null],
    ["another x402 version", envelope({ x402Version: 1 }), CONTEXT, X402_REASONS.invalidX402Version],
    [
      "an accepted requirement unlike ours",
      envelope({ accepted: { ...OURS, amount: "1" } }),
      CONTEXT,
      X402_REASONS.valueMismatch,
    ],
    [
      "an authorization to someone else",
      envelope({ authorization: { to: "0x0000000000000000000000000000000000000002" } }),
      CONTEXT,
      X402_REASONS.recipientMismatch,
    ],
    [
      "an authorization of another value",
      envelope({ authorization: { value: 10_001n } }),
      CONTEXT,
      X402_REASONS.valueMismatch,
    ],
    [
      "a window that ends inside the margin",
      envelope({ authorization: { validBefore: NOW + 5n } }),
      CONTEXT,
      X402_REASONS.validBefore,
    ],
    [
      "a window that opens inside the margin",
      envelope({ authorization: { validAfter: NOW - 5n } }),
      CONTEXT,
      X402_REASONS.validAfter,
    ],
    [
      "a window exactly the requirement's timeout long",
      envelope({ authorization: { validBefore: NOW + 60n } }),
      CONTEXT,
      null,
    ],
    [
      "a window the requirement's timeout long by a payer's clock 30 s ahead of ours",
      envelope({ authorization: { validBefore: NOW + 60n + PAYER_CLOCK_AHEAD_SECONDS } }),
      CONTEXT,
      null,
    ],
    [
      "a window a second longer than that",
      envelope({ authorization: { validBefore: NOW + 61n + PAYER_CLOCK_AHEAD_SECONDS } }),
      CONTEXT,
      X402_REASONS.validityTooLong,
    ],
    [
      "a window exactly the enclave's sealed longest validity, under the requirement's timeout and the 30 s",
      envelope({ authorization: { validBefore: NOW + 75n } }),
      { ...CONTEXT, maxValiditySeconds: 75n },
      null,
    ],
    [
      "a window a second longer than the enclave's sealed longest validity, though within the requirement's timeout and the 30 s",
      envelope({ authorization: { validBefore: NOW + 76n } }),
      { ...CONTEXT, maxValiditySeconds: 75n },
      X402_REASONS.validityTooLong,
    ],
    [
      "a high-S twin of a valid signature",
      envelope({ signature: highS(envelope({}).signature) }),
      CONTEXT,
      X402_REASONS.signatureHighS,
    ],
    [
      "signed by someone other than `from`",
      envelope({ signWith: otherKey }),
      CONTEXT,
      X402_REASONS.signature,
    ],
    [
      "the operator pool as payer",
      envelope({}),
      { ...CONTEXT, operatorPool: PAYER },
      X402_REASONS.payerNotAllowed,
    ],
  ];
  for (const [name, given, context, reason] of cases) {
    it(name, () => {
      const result = checkPayment(given, OURS, context);
      expect(result.ok ? null : result.error.code).toBe(reason);
      expect(result.ok ? result.value.payer : result.error.payer).toBe(PAYER);
    });
  }
});

describe("checkClosedPayment: a payment past its window, checked as of the last second it was in it", () => {
  // What the facilitator looks up a settlement for rather than refusing it as expired
  // (facilitator-core.ts checkSigned); anything else is refused as checkPayment refuses it now.
  const closed = { ...CONTEXT, nowSeconds: NOW + 600n };
  const otherKey = fromHex(`0x${"22".repeat(32)}`);
  const cases: Array<[string, PaymentEnvelope, string | null]> = [
    ["sound, its window closed", envelope({}), null],
    ["closed with exactly the margin left", envelope({ authorization: { validBefore: NOW + 606n } }), null],
    [
      "never in a window of the margin's width",
      envelope({ authorization: { validAfter: NOW + 50n } }),
      X402_REASONS.validAfter,
    ],
    ["signed by someone other than `from`", envelope({ signWith: otherKey }), X402_REASONS.signature],
    ["another amount", envelope({ authorization: { value: 1n } }), X402_REASONS.valueMismatch],
  ];
  for (const [name, given, reason] of cases) {
    it(name, () => {
      expect(checkPayment(given, OURS, closed)).toMatchObject({ ok: false });
      const result = checkClosedPayment(given, OURS, closed);
      expect(result.ok ? null : result.error.code).toBe(reason);
    });
  }
});
