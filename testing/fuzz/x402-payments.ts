/**
 * x402 inputs for the fuzz suite: payment envelopes shaped as the official client sends them
 * (docs/x402.md), signed for real so the fuzz reaches verify's deep checks and, now and
 * then, a settlement; the `PAYMENT-SIGNATURE` values that carry them (Base64 of a sound, mutated
 * or hostile JSON text, or broken Base64); and the facilitator's request bodies.
 */
import { createHash } from "node:crypto";
import fc from "fast-check";
import type { Address } from "viem";
import { DEV_OPERATOR_POOL_PRIVATE_KEY } from "../../devnet/index.ts";
import { highS } from "../../devnet/testing.ts";
import { demoRequirements } from "../../origin/x402/payee/requirements.ts";
import { transferWithAuthorizationDigest } from "../../shared/eip712.ts";
import { fromHex, type Hex, toHex } from "../../shared/hex.ts";
import { addressOfPublicKey, publicKeyOf, signDigest } from "../../shared/secp256k1.ts";
import { anyJson, headerValue, hostileBody, hostileString, mutatedBody } from "./hostile.ts";

const key = (label: string): Uint8Array => createHash("sha256").update(`fuzz x402 ${label}`).digest();

/**
 * The fuzz stack's x402 terms and payers, fixed so the routes can be listed before the stack
 * starts: a funded payer (its payments can settle), an empty one (insufficient balance) and the
 * operator pool (barred as payer).
 */
export const FUZZ_X402 = {
  amountUnits: 10_000n,
  payTo: addressOfPublicKey(publicKeyOf(key("pay to"))).toLowerCase() as Address,
  fundedPayer: key("funded payer"),
  emptyPayer: key("empty payer"),
};

/** The demo's one requirement, as its 402 quotes it (the fuzz stack keeps the default longest validity). */
export const fuzzRequirement = demoRequirements({ ...FUZZ_X402, maxTimeoutSeconds: 180 });

const payers = [FUZZ_X402.fundedPayer, FUZZ_X402.emptyPayer, fromHex(DEV_OPERATOR_POOL_PRIVATE_KEY)];

/**
 * Nonces of sound payments come mostly from a small pool: each (payer, nonce) settles once, so the
 * number of settlements (and the fuzz's time) stays bounded and the rest are replays.
 */
const NONCE_POOL = Array.from({ length: 6 }, (_, index) => toHex(key(`nonce ${index}`)));

const often = <T>(right: fc.Arbitrary<T>, wrong: fc.Arbitrary<T>): fc.Arbitrary<T> =>
  fc.oneof({ weight: 5, arbitrary: right }, { weight: 1, arbitrary: wrong });

const address = fc.uint8Array({ minLength: 20, maxLength: 20 }).map((bytes) => toHex(bytes) as Address);
const UINT256_MAX = 2n ** 256n - 1n;

/** A requirement as the client copied it: ours, or ours with one field changed. */
const accepted: fc.Arbitrary<Record<string, unknown>> = often(
  fc.constant(fuzzRequirement),
  fc
    .tuple(fc.constantFrom(...Object.keys(fuzzRequirement)), anyJson)
    .map(([field, value]) => ({ ...fuzzRequirement, [field]: value })),
);

/**
 * An envelope signed by a real key, its fields mostly right: the seconds are read when the case
 * is generated, so a replayed seed reproduces the shape, not the clock.
 */
export const signedPayload: fc.Arbitrary<Record<string, unknown>> = fc
  .record({
    payer: fc.oneof(
      { weight: 6, arbitrary: fc.constant(0) },
      { weight: 1, arbitrary: fc.constantFrom(1, 2) },
    ),
    to: often(fc.constant(FUZZ_X402.payTo), address),
    value: often(
      fc.constant(FUZZ_X402.amountUnits),
      fc.constantFrom(0n, 1n, FUZZ_X402.amountUnits + 1n, UINT256_MAX),
    ),
    validAfter: often(fc.constant(0n), fc.constantFrom(30n, 3_600n, UINT256_MAX)),
    validBefore: often(fc.constant(50n), fc.constantFrom(-1n, 0n, 61n, 1_000_000n, UINT256_MAX)),
    nonce: often(fc.constantFrom(...NONCE_POOL), fc.uint8Array({ minLength: 32, maxLength: 32 }).map(toHex)),
    accepted,
    x402Version: often(fc.constant<unknown>(2), fc.constantFrom<unknown>(1, 3, "2", 2.5, null)),
    highS: fc.oneof(
      { weight: 12, arbitrary: fc.constant(false) },
      { weight: 1, arbitrary: fc.constant(true) },
    ),
    // The seller's resource the payment names (unsigned: the catalogue lists it once settled).
    resource: often<Record<string, unknown>>(
      fc.constant({ url: "http://127.0.0.1/77/x402/demo", mimeType: "application/json" }),
      fc.record(
        {
          url: fc.oneof(
            fc.constantFrom("https://seller.example/weather", "https://seller.example/a?b=c"),
            fc.webUrl(),
          ),
          description: fc.oneof(fc.string({ maxLength: 80 }), hostileString),
          mimeType: fc.constantFrom("application/json", "text/ html", "image/png"),
        },
        { requiredKeys: ["url"] },
      ),
    ),
  })
  .map((fields) => {
    const now = BigInt(Math.floor(Date.now() / 1000));
    const clamp = (value: bigint) => (value < 0n ? 0n : value > UINT256_MAX ? UINT256_MAX : value);
    const relative = (offset: bigint) => (offset === UINT256_MAX ? offset : clamp(now + offset));
    const authorization = {
      from: addressOfPublicKey(publicKeyOf(payers[fields.payer]!)).toLowerCase() as Address,
      to: fields.to,
      value: fields.value,
      validAfter: fields.validAfter === 0n ? 0n : relative(fields.validAfter),
      validBefore: relative(fields.validBefore),
      nonce: fields.nonce as Hex,
    };
    const signed = signDigest(fromHex(transferWithAuthorizationDigest(authorization)), payers[fields.payer]!);
    return {
      x402Version: fields.x402Version,
      resource: fields.resource,
      accepted: fields.accepted,
      payload: {
        authorization: {
          ...authorization,
          value: authorization.value.toString(),
          validAfter: authorization.validAfter.toString(),
          validBefore: authorization.validBefore.toString(),
        },
        signature: fields.highS ? highS(signed.signature) : signed.signature,
      },
    };
  });

const base64 = (text: string | Uint8Array) => Buffer.from(text).toString("base64");

/**
 * `PAYMENT-SIGNATURE` values: Base64 of a signed envelope, sound or mutated (a field dropped, a
 * prototype key, a hostile value, a key twice), of hostile JSON texts (deep nesting, huge numbers,
 * invalid UTF-8) or of no JSON at all, and Base64 that is broken. Absent now and then (the quote).
 */
export const paymentHeaders: fc.Arbitrary<string | undefined> = (() => {
  const envelopeText = mutatedBody(signedPayload).map(String);
  const encoded = envelopeText.map(base64);
  const broken = fc.oneof(
    fc
      .tuple(encoded, fc.nat())
      .map(([value, cut]) => value.slice(0, Math.max(1, value.length - 1 - (cut % 3)))),
    encoded.map((value) => value.replace(/=+$/, "")),
    encoded.map((value) => value.replaceAll("+", "-").replaceAll("/", "_")),
    fc
      .tuple(encoded, fc.nat(), fc.constantFrom("!", " ", "=", "*", "é", "\t"))
      .map(
        ([value, at, junk]) => `${value.slice(0, at % value.length)}${junk}${value.slice(at % value.length)}`,
      ),
    headerValue(300),
  );
  return fc.oneof(
    { weight: 8, arbitrary: encoded },
    // Hostile texts, kept under the 16 KiB header limit once encoded.
    { weight: 3, arbitrary: hostileBody(2_000).map(base64) },
    { weight: 3, arbitrary: broken },
    { weight: 1, arbitrary: fc.constant(undefined) },
  );
})();

/** A 402 quote of this node's terms (its requirement sometimes changed), for the authorize route. */
export const payableQuotes: fc.Arbitrary<Record<string, unknown>> = accepted.map((requirement) => ({
  x402Version: 2,
  resource: { url: "http://127.0.0.1/77/x402/demo", mimeType: "application/json" },
  accepts: [requirement],
}));

/**
 * `{x402Version, paymentPayload, paymentRequirements}`, mostly right; the rest of the hostility comes from
 * the request generator.
 */
export const facilitatorBodies: fc.Arbitrary<Record<string, unknown>> = fc.record(
  {
    x402Version: often(fc.constant<unknown>(2), anyJson),
    paymentPayload: often(signedPayload, anyJson),
    paymentRequirements: accepted,
  },
  { requiredKeys: [] },
);
