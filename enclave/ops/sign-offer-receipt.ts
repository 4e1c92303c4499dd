/**
 * sign_x402_offer and sign_x402_receipt: the payee key (payee-key.ts) signs the offer-receipt
 * extension's EIP-712 Offer and Receipt, and no other type: there is no op that signs a typed
 * digest or a message handed to it; the enclave builds both digests itself
 * (shared/offer-receipt-typed-data.ts). An offer carries only the node's sealed x402 terms and is
 * valid from the enclave's clock for no longer than the sealed maximum; a receipt names only a
 * settlement the settler key signed here (offer-receipt-checks.ts,
 * docs/security.md#offers-and-receipts). The caller names the payee address it expects (key
 * binding), as every signing op does.
 */
import { OFFER_RECEIPT_VERSION } from "../../shared/enclave-ops.ts";
import { fromHex } from "../../shared/hex.ts";
import { offerDigest, receiptDigest } from "../../shared/offer-receipt-typed-data.ts";
import { err } from "../../shared/result.ts";
import { signDigest } from "../../shared/secp256k1.ts";
import { checkOfferTerms, checkReceiptClaim } from "../offer-receipt-checks.ts";
import { KEY_NOT_USABLE, succeed } from "../outcome.ts";
import { payeeKey } from "../payee-key.ts";
import { checkKeyBinding } from "../policy-checks.ts";
import type { OpHandler } from "./handler.ts";

export const signX402Offer: OpHandler<"sign_x402_offer"> = (ctx, params) => {
  const key = payeeKey(ctx.keystore, ctx.state);
  if (!key) return KEY_NOT_USABLE;
  const binding = checkKeyBinding(key.address, params.payee_address);
  if (binding) return err(binding);
  const refusal = checkOfferTerms(ctx.state.state.policy, ctx.config.chain_id, key.address, {
    scheme: params.scheme,
    network: params.network,
    asset: params.asset,
    payTo: params.pay_to,
    amount: params.amount,
    validForSeconds: params.valid_for_seconds,
  });
  if (refusal) return err(refusal);
  const offer = {
    version: OFFER_RECEIPT_VERSION,
    resourceUrl: params.resource_url,
    scheme: params.scheme,
    network: params.network,
    asset: params.asset,
    payTo: params.pay_to,
    amount: params.amount,
    validUntil: Math.floor(ctx.now().getTime() / 1000) + params.valid_for_seconds,
  };
  const { signature } = signDigest(fromHex(offerDigest(offer)), key.privateKey);
  return succeed({
    payload: {
      version: offer.version,
      resource_url: offer.resourceUrl,
      scheme: offer.scheme,
      network: offer.network,
      asset: offer.asset,
      pay_to: offer.payTo,
      amount: offer.amount,
      valid_until: offer.validUntil,
    },
    signature,
  });
};

export const signX402Receipt: OpHandler<"sign_x402_receipt"> = (ctx, params) => {
  const key = payeeKey(ctx.keystore, ctx.state);
  if (!key) return KEY_NOT_USABLE;
  const binding = checkKeyBinding(key.address, params.payee_address);
  if (binding) return err(binding);
  const nowSeconds = Math.floor(ctx.now().getTime() / 1000);
  const refusal = checkReceiptClaim(ctx.config.chain_id, key.address, {
    network: params.network,
    payer: params.payer,
    settlement: ctx.settlements.get(params.transaction, BigInt(nowSeconds)),
  });
  if (refusal) return err(refusal);
  const receipt = {
    version: OFFER_RECEIPT_VERSION,
    network: params.network,
    resourceUrl: params.resource_url,
    payer: params.payer,
    issuedAt: nowSeconds,
    transaction: params.transaction,
  };
  const { signature } = signDigest(fromHex(receiptDigest(receipt)), key.privateKey);
  return succeed({
    payload: {
      version: receipt.version,
      network: receipt.network,
      resource_url: receipt.resourceUrl,
      payer: receipt.payer,
      issued_at: receipt.issuedAt,
      transaction: params.transaction,
    },
    signature,
  });
};
