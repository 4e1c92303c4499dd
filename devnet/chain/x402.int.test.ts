import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme as ExactEvmClient } from "@x402/evm/exact/client";
import { ExactEvmScheme as ExactEvmFacilitator } from "@x402/evm/exact/facilitator";
import { encodeFunctionData, type Hex, parseEventLogs, parseSignature, publicActions } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CAIP2_NETWORK, NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../../shared/constants.ts";
import { officialFacilitatorSigner } from "../../testing/x402-official-client.ts";
import { sellerRequirement } from "../../testing/x402-quote.ts";
import { type Devnet, NATIVE_TRANSFER_AUTH_ABI, startDevnet } from "../index.ts";
import { fund, newAccount, publicClientFor, usdc, walletClientFor } from "../testing.ts";

/** The requirement a chain-77 resource quotes. */
const requirement = (payTo: string): PaymentRequirements => sellerRequirement({ payTo, amount: 10_000n });

type Eip3009Payload = {
  signature: Hex;
  authorization: { from: Hex; to: Hex; value: string; validAfter: string; validBefore: string; nonce: Hex };
};

describe("devnet: the official x402 EVM exact scheme pays and settles against NativeTransferAuth", () => {
  let devnet: Devnet;

  beforeAll(async () => {
    devnet = await startDevnet({ port: 0 });
  });
  afterAll(async () => {
    await devnet.close();
  });

  it("an authorization signed by @x402/evm's client settles when submitted to the precompile", async () => {
    const client = publicClientFor(devnet.url);
    const payer = newAccount();
    const payTo = newAccount();
    const relayer = newAccount();
    await fund(devnet.url, payer.address, usdc(1n));
    await fund(devnet.url, relayer.address, usdc(1n));
    const accepted = requirement(payTo.address);

    const created = await new ExactEvmClient(payer).createPaymentPayload(2, accepted);
    const { authorization, signature } = created.payload as Eip3009Payload;
    expect(authorization.from).toBe(payer.address);
    expect(authorization.value).toBe("10000");

    const { v, r, s } = parseSignature(signature);
    const data = encodeFunctionData({
      abi: NATIVE_TRANSFER_AUTH_ABI,
      functionName: "transferWithAuthorization",
      args: [
        authorization.from,
        authorization.to,
        BigInt(authorization.value),
        BigInt(authorization.validAfter),
        BigInt(authorization.validBefore),
        authorization.nonce,
        Number(v),
        r,
        s,
      ],
    });
    const hash = await walletClientFor(devnet.url, relayer).sendTransaction({
      to: NATIVE_TRANSFER_AUTH_ADDRESS,
      data,
    });
    const receipt = await client.waitForTransactionReceipt({ hash });

    expect(receipt.status).toBe("success");
    expect(await client.getBalance({ address: payTo.address })).toBe(10_000n * WEI_PER_UNIT);
    expect(await client.getBalance({ address: payer.address })).toBe(usdc(1n) - 10_000n * WEI_PER_UNIT);
    const transfer = parseEventLogs({
      abi: NATIVE_TRANSFER_AUTH_ABI,
      eventName: "Transfer",
      logs: receipt.logs,
    });
    expect(transfer[0]?.args).toEqual({ from: payer.address, to: payTo.address, value: 10_000n });
  });

  it("@x402/evm's facilitator verifies and settles the payment on the devnet, and refuses it twice", async () => {
    const client = publicClientFor(devnet.url);
    const payer = newAccount();
    const payTo = newAccount();
    const settler = newAccount();
    await fund(devnet.url, payer.address, usdc(1n));
    await fund(devnet.url, settler.address, usdc(1n));
    const accepted = requirement(payTo.address);
    const created = await new ExactEvmClient(payer).createPaymentPayload(2, accepted);
    const paymentPayload: PaymentPayload = {
      x402Version: 2,
      resource: { url: "http://127.0.0.1/x402/demo", mimeType: "application/json", description: "demo" },
      accepted,
      payload: created.payload,
    };
    const wallet = walletClientFor(devnet.url, settler).extend(publicActions);
    const facilitator = new ExactEvmFacilitator(officialFacilitatorSigner(wallet));

    const verified = await facilitator.verify(paymentPayload, accepted);
    expect(verified).toMatchObject({ isValid: true, payer: payer.address });

    const settled = await facilitator.settle(paymentPayload, accepted);
    expect(settled).toMatchObject({ success: true, network: CAIP2_NETWORK, payer: payer.address });
    const receipt = await client.getTransactionReceipt({ hash: settled.transaction as Hex });
    expect(receipt.status).toBe("success");
    expect(await client.getBalance({ address: payTo.address })).toBe(10_000n * WEI_PER_UNIT);

    const again = await facilitator.verify(paymentPayload, accepted);
    expect(again.isValid).toBe(false);
  });
});
