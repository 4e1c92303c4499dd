/**
 * A paying client for the x402 tests, made of the official packages (`@x402/evm`'s exact scheme
 * signs, `@x402/fetch` decodes PAYMENT-RESPONSE) and viem: a funded payer, a payment envelope as
 * `@x402/fetch` would send it and one paid request (settlements counted: x402-settlements.ts).
 */
import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { declarePaymentIdentifierExtension, PAYMENT_IDENTIFIER } from "@x402/extensions/payment-identifier";
import { decodePaymentResponseHeader } from "@x402/fetch";
import type { Hex, PrivateKeyAccount } from "viem";
import { fund, newAccount } from "../devnet/testing.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import { nativeTransferAuthDomain, TRANSFER_WITH_AUTHORIZATION_TYPES } from "../shared/eip712.ts";

export type PaidAnswer = {
  status: number;
  body: { error?: string };
  /** PAYMENT-RESPONSE, decoded, when the answer carries one. */
  response?: Record<string, unknown>;
};

/** A new account holding `units` of native USDC on the devnet. */
export async function fundedPayer(devnetUrl: string, units = 1_000_000n): Promise<PrivateKeyAccount> {
  const account = newAccount();
  await fund(devnetUrl, account.address, units * WEI_PER_UNIT);
  return account;
}

/** The demo's unpaid answer: the resource and the one requirement it accepts. */
export async function quote(
  demoUrl: string,
): Promise<{ resource: PaymentPayload["resource"]; accepted: PaymentRequirements }> {
  const response = await fetch(demoUrl);
  const body = (await response.json()) as {
    resource: PaymentPayload["resource"];
    accepts: PaymentRequirements[];
  };
  return { resource: body.resource, accepted: body.accepts[0]! };
}

/** A payment envelope made by @x402/evm's own client (signed for `change(accepted)`). */
export async function envelope(
  demoUrl: string,
  account: PrivateKeyAccount,
  change: (accepted: PaymentRequirements) => PaymentRequirements = (a) => a,
): Promise<PaymentPayload> {
  const { resource, accepted } = await quote(demoUrl);
  const created = await new ExactEvmScheme(account).createPaymentPayload(2, change(accepted));
  return { x402Version: 2, resource, accepted, payload: created.payload };
}

/** `payment` carrying payment id `id`, as the `payment-identifier` extension's client helper adds it. */
export function withPaymentId(payment: PaymentPayload, id: string): PaymentPayload {
  return {
    ...payment,
    extensions: {
      [PAYMENT_IDENTIFIER]: { ...declarePaymentIdentifierExtension(false), info: { required: false, id } },
    },
  };
}

/** A fresh payment of `account`'s for `demoUrl` (envelope), carrying payment id `id`. */
export async function identifiedEnvelope(
  demoUrl: string,
  account: PrivateKeyAccount,
  id: string,
): Promise<PaymentPayload> {
  return withPaymentId(await envelope(demoUrl, account), id);
}

/**
 * A payment envelope for `quoted` signed by `account` with the validity window a client chose
 * (the official client always sends validAfter 0 and validBefore now + maxTimeoutSeconds).
 */
export async function envelopeWithWindow(
  quoted: { resource: PaymentPayload["resource"]; accepted: PaymentRequirements },
  account: PrivateKeyAccount,
  window: { validAfter: bigint; validBefore: bigint },
): Promise<PaymentPayload> {
  const nonce = `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("hex")}` as Hex;
  const { accepted } = quoted;
  const message = {
    from: account.address,
    to: accepted.payTo as Hex,
    value: BigInt(accepted.amount),
    validAfter: window.validAfter,
    validBefore: window.validBefore,
    nonce,
  };
  const signature = await account.signTypedData({
    domain: nativeTransferAuthDomain(),
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: "TransferWithAuthorization",
    message,
  });
  const authorization = {
    ...message,
    value: accepted.amount,
    validAfter: window.validAfter.toString(),
    validBefore: window.validBefore.toString(),
  };
  return { x402Version: 2, resource: quoted.resource, accepted, payload: { authorization, signature } };
}

/** The PAYMENT-SIGNATURE header of an envelope (Base64 of its JSON). */
export const paymentHeader = (payload: unknown): string =>
  Buffer.from(JSON.stringify(payload)).toString("base64");

/** One paid request: the status, the body and the decoded PAYMENT-RESPONSE. */
export async function pay(demoUrl: string, signature: string): Promise<PaidAnswer> {
  const response = await fetch(demoUrl, { headers: { "PAYMENT-SIGNATURE": signature } });
  const paymentResponse = response.headers.get("PAYMENT-RESPONSE");
  return {
    status: response.status,
    body: (await response.json()) as { error?: string },
    response: paymentResponse
      ? (decodePaymentResponseHeader(paymentResponse) as unknown as Record<string, unknown>)
      : undefined,
  };
}
