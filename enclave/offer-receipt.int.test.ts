import {
  type EIP712SignedReceipt,
  verifyOfferSignatureEIP712,
  verifyReceiptSignatureEIP712,
} from "@x402/extensions/offer-receipt";
import type { Address, Hex } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";
import { nativeTransferAuthDomain, TRANSFER_WITH_AUTHORIZATION_TYPES } from "../shared/eip712.ts";
import type { EnclaveResponse } from "../shared/enclave-protocol.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { privileged } from "./testing/capabilities.ts";
import { asOffer, asReceipt } from "./testing/offer-receipt-wire.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// A compromised origin asks the payee key to sign whatever it likes, straight over the socket: the
// enclave signs an offer only over the node's sealed x402 terms, a receipt only for a settlement
// the settler key signed here to the payee, and no other EIP-712 type at all
// (docs/security.md#offers-and-receipts).

const AMOUNT = 10_000n;
const ASSET = NATIVE_TRANSFER_AUTH_ADDRESS.toLowerCase();
const RESOURCE = "https://pay.example.test/77/x402/demo";
const MAX_TIMEOUT_SECONDS = 180;
const nowSeconds = (): bigint => BigInt(Math.floor(Date.now() / 1000));
let nonces = 0;
const freshNonce = (): Hex => `0x${(++nonces).toString(16).padStart(64, "0")}`;

describe("the payee key signs offers and receipts, and nothing else (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  let payee: { key_ref: string; address: Address };
  let settler: { key_ref: string; address: Address };
  const payer = privateKeyToAccount(generatePrivateKey());

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "offer-receipt-env" });
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    const sealed = expectOk(await client.request("get_policy", {}));
    const named = sealed.payee as { payee_key_ref: string; payee_address: Address };
    payee = { key_ref: named.payee_key_ref, address: named.payee_address };
    await privileged(client, fixture, "configure_policy", sealedPolicy());
    const made = await privileged(client, fixture, "configure_settler", {});
    settler = { key_ref: made.settler_key_ref as string, address: made.settler_address as Address };
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  /** The node's policy as the operator seals it: x402 paying the payee key; `change` replaces fields. */
  const sealedPolicy = (change: Record<string, unknown> = {}): Record<string, unknown> => ({
    per_tx_limit_units: "0",
    daily_limit_units: "0",
    recipient_allowlist: null,
    x402_amount_units: AMOUNT.toString(),
    x402_pay_to: payee.address.toLowerCase(),
    x402_max_timeout_seconds: MAX_TIMEOUT_SECONDS,
    operator_pool: "0x00000000000000000000000000000000000000aa",
    fee_ceiling_wei: "1000000000000000",
    x402_validity_margin_seconds: 6,
    x402_daily_limit: 1000,
    settler_daily_fee_units: "1000000000",
    ...change,
  });

  const offerParams = (change: Record<string, unknown> = {}): Record<string, unknown> => ({
    payee_address: payee.address.toLowerCase(),
    resource_url: RESOURCE,
    scheme: "exact",
    network: "eip155:77",
    asset: ASSET,
    pay_to: payee.address.toLowerCase(),
    amount: AMOUNT.toString(),
    valid_for_seconds: 60,
    ...change,
  });
  const refusal = (response: EnclaveResponse) =>
    response.ok ? "signed" : { code: response.error.code, detail: response.error.detail };

  /** A settlement the settler key signs here: payer → `to` (the payee key unless named), the sealed amount. */
  const settle = async (to: Address = payee.address): Promise<Hex> => {
    const message = {
      from: payer.address,
      to,
      value: AMOUNT,
      validAfter: 0n,
      validBefore: nowSeconds() + 120n,
      nonce: freshNonce(),
    };
    const signature = await payer.signTypedData({
      domain: nativeTransferAuthDomain(),
      types: TRANSFER_WITH_AUTHORIZATION_TYPES,
      primaryType: "TransferWithAuthorization",
      message,
    });
    const signed = expectOk(
      await client.request("sign_settlement", {
        key_ref: settler.key_ref,
        chain_id: CHAIN_ID,
        authorization: {
          from: message.from.toLowerCase(),
          to: message.to.toLowerCase(),
          value: message.value.toString(),
          valid_after: "0",
          valid_before: message.validBefore.toString(),
          nonce: message.nonce,
        },
        signature: signature.toLowerCase(),
        nonce: String(nonces),
        max_fee_per_gas: "1000",
        max_priority_fee_per_gas: "1",
        gas_limit: "100000",
      }),
    );
    return signed.tx_hash as Hex;
  };
  const receiptParams = (transaction: Hex, change: Record<string, unknown> = {}) => ({
    payee_address: payee.address.toLowerCase(),
    resource_url: RESOURCE,
    network: "eip155:77",
    payer: payer.address.toLowerCase(),
    transaction,
    ...change,
  });

  it("signs an offer over the sealed terms, valid from its own clock for what was asked; the official verifier recovers the payee", async () => {
    const before = Number(nowSeconds());
    const offer = asOffer(expectOk(await client.request("sign_x402_offer", offerParams())));
    const verified = await verifyOfferSignatureEIP712(offer);
    expect(verified.signer).toBe(payee.address);
    expect(offer.payload).toMatchObject({ version: 1, resourceUrl: RESOURCE, amount: AMOUNT.toString() });
    expect(offer.payload.validUntil).toBeGreaterThanOrEqual(before + 60);
    expect(offer.payload.validUntil).toBeLessThanOrEqual(Number(nowSeconds()) + 60);
  });

  it("refuses an offer with any other term, or valid longer than the sealed maximum, each as offer_terms", async () => {
    // Mutation: dropping any one comparison of checkOfferTerms signs its case.
    const stranger = privateKeyToAccount(generatePrivateKey()).address.toLowerCase();
    const cases: Record<string, Record<string, unknown>> = {
      amount: { amount: (AMOUNT + 1n).toString() },
      "pay to": { pay_to: stranger },
      asset: { asset: stranger },
      network: { network: "eip155:1" },
      scheme: { scheme: "upto" },
      validity: { valid_for_seconds: MAX_TIMEOUT_SECONDS + 1 },
    };
    const answers: Record<string, unknown> = {};
    for (const [name, change] of Object.entries(cases)) {
      answers[name] = refusal(await client.request("sign_x402_offer", offerParams(change)));
    }
    const refused = { code: "cap_exceeded", detail: "offer_terms" };
    expect(answers).toEqual(Object.fromEntries(Object.keys(cases).map((name) => [name, refused])));
    // And the payee address the caller expects is the payee key's (key binding).
    expect(
      refusal(await client.request("sign_x402_offer", offerParams({ payee_address: stranger }))),
    ).toEqual({ code: "key_purpose_mismatch", detail: "key_binding" });
  });

  it("signs a receipt naming a settlement the settler key signed here, by its payer; the official verifier recovers the payee", async () => {
    const transaction = await settle();
    const receipt = asReceipt(
      expectOk(await client.request("sign_x402_receipt", receiptParams(transaction))),
    );
    const verified = await verifyReceiptSignatureEIP712(receipt);
    expect(verified.signer).toBe(payee.address);
    expect(receipt.payload).toMatchObject({
      version: 1,
      network: "eip155:77",
      payer: payer.address.toLowerCase(),
      transaction,
    });
    expect(Math.abs(receipt.payload.issuedAt - Number(nowSeconds()))).toBeLessThanOrEqual(5);
  });

  it("refuses a receipt for a settlement it never signed, for another payer or on another network, as receipt_settlement", async () => {
    // Mutation: letting checkReceiptClaim pass an unknown settlement signs the first case.
    const transaction = await settle();
    const stranger = privateKeyToAccount(generatePrivateKey()).address.toLowerCase();
    const unknown = `0x${"5a".repeat(32)}` as Hex;
    const answers = {
      unknown: refusal(await client.request("sign_x402_receipt", receiptParams(unknown))),
      "another payer": refusal(
        await client.request("sign_x402_receipt", receiptParams(transaction, { payer: stranger })),
      ),
      "another network": refusal(
        await client.request("sign_x402_receipt", receiptParams(transaction, { network: "eip155:1" })),
      ),
    };
    const refused = { code: "cap_exceeded", detail: "receipt_settlement" };
    expect(answers).toEqual({ unknown: refused, "another payer": refused, "another network": refused });
  });

  it("refuses a receipt for a settlement the settler signed to another payee, under a ceiling that lets it pay anyone, as receipt_settlement", async () => {
    // A compromised origin settles a payer's payment to an address of its own (the node's ceiling,
    // with no list, lets the settler pay any payee), then asks the payee key to vouch for it.
    const elsewhere = privateKeyToAccount(generatePrivateKey()).address;
    await privileged(
      client,
      fixture,
      "configure_policy",
      sealedPolicy({ x402_max_per_payment_units: "20000" }),
    );
    try {
      const transaction = await settle(elsewhere);
      // Mutation: dropping the payee comparison of checkReceiptClaim signs this receipt.
      expect(refusal(await client.request("sign_x402_receipt", receiptParams(transaction)))).toEqual({
        code: "cap_exceeded",
        detail: "receipt_settlement",
      });
      // The same payer's settlement to the payee key still gets its receipt.
      expectOk(await client.request("sign_x402_receipt", receiptParams(await settle())));
    } finally {
      await privileged(client, fixture, "configure_policy", sealedPolicy());
    }
  });

  it("refuses an offer when the sealed payTo is not the payee key: neither the sealed payTo nor the payee key's address is offered", async () => {
    // The payee key vouches only for payments to itself that the node's terms name: sealed with
    // another payTo, it offers nothing.
    const sealedElsewhere = privateKeyToAccount(generatePrivateKey()).address.toLowerCase();
    await privileged(client, fixture, "configure_policy", sealedPolicy({ x402_pay_to: sealedElsewhere }));
    try {
      const refused = { code: "cap_exceeded", detail: "offer_terms" };
      // Mutation: dropping the payee-key comparison of checkOfferTerms signs the first;
      // dropping the sealed-payTo comparison signs the second.
      expect({
        "the sealed payTo": refusal(
          await client.request("sign_x402_offer", offerParams({ pay_to: sealedElsewhere })),
        ),
        "the payee key": refusal(await client.request("sign_x402_offer", offerParams())),
      }).toEqual({ "the sealed payTo": refused, "the payee key": refused });
    } finally {
      await privileged(client, fixture, "configure_policy", sealedPolicy());
    }
    expectOk(await client.request("sign_x402_offer", offerParams()));
  });

  it("signs no other EIP-712 type: no op takes a typed digest, domain or type, and an offer never passes for a receipt", async () => {
    // Mutation: a non-strict params schema of sign_x402_offer signs the second case.
    const typed = {
      domain: { name: "USDC", version: "2", chainId: 77, verifyingContract: ASSET },
      primary_type: "TransferWithAuthorization",
      message: { from: payee.address, to: payer.address, value: "1000000" },
    };
    expect(refusal(await client.request("sign_typed_data", typed))).toEqual({
      code: "malformed",
      detail: undefined,
    });
    expect(
      refusal(await client.request("sign_x402_offer", offerParams({ primary_type: "Receipt" }))),
    ).toEqual({
      code: "malformed",
      detail: undefined,
    });
    expect(
      refusal(
        await client.request("sign_x402_receipt", {
          ...receiptParams(await settle()),
          domain: typed.domain,
        }),
      ),
    ).toEqual({ code: "malformed", detail: undefined });
    // The two types have their own domains: an offer's signature recovers no payee as a receipt.
    const offer = asOffer(expectOk(await client.request("sign_x402_offer", offerParams())));
    const asIfReceipt: EIP712SignedReceipt = {
      format: "eip712",
      payload: {
        version: 1,
        network: offer.payload.network,
        resourceUrl: offer.payload.resourceUrl,
        payer: payer.address.toLowerCase(),
        issuedAt: offer.payload.validUntil,
        transaction: "",
      },
      signature: offer.signature,
    };
    const recovered = await verifyReceiptSignatureEIP712(asIfReceipt).then(
      (result) => result.signer,
      () => "none",
    );
    expect(recovered).not.toBe(payee.address);
  });

  it("keeps its payee key across a restart and a repeated configure_payee; a restart forgets the settlements it signed", async () => {
    const transaction = await settle();
    const kept = await privileged(client, fixture, "configure_payee", {});
    expect(kept).toEqual({ payee_key_ref: payee.key_ref, payee_address: payee.address });
    client.close();
    await fixture.start();
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    const sealed = expectOk(await client.request("get_policy", {}));
    expect(sealed.payee).toEqual({ payee_key_ref: payee.key_ref, payee_address: payee.address });
    // In memory only (recent-settlements.ts): no receipt for a settlement signed before the restart.
    expect(refusal(await client.request("sign_x402_receipt", receiptParams(transaction)))).toEqual({
      code: "cap_exceeded",
      detail: "receipt_settlement",
    });
  });
});
