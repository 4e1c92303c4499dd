import type { Address } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  DEV_OPERATOR_POOL_ADDRESS,
  type Devnet,
  NATIVE_TRANSFER_AUTH_ABI,
  startDevnet,
} from "../devnet/index.ts";
import { fund, newAccount, publicClientFor, walletClientFor } from "../devnet/testing.ts";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../shared/constants.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { privileged } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

const RECIPIENT: Address = "0x1111111111111111111111111111111111111111";
/** 10^15 wei (1000 units): far above any fee the devnet asks for, far below a wallet's balance. */
const FEE_CEILING_WEI = "1000000000000000";
/** 100 USDC, in wei. */
const WALLET_BALANCE_WEI = 10n ** 20n;
/**
 * A fee-only drain: value 0, and a tip as high as the fee cap so the whole maximum fee is
 * paid. 21000 × 4761904761904761 = 99999999999999981000 wei: the wallet keeps 19000 wei.
 */
const DRAIN_FEE_PER_GAS = (WALLET_BALANCE_WEI / 21_000n).toString();

describe("enclave-signed transactions on the devnet (real enclave process, real devnet)", () => {
  let devnet: Devnet;
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  /** An agent key: the only kind of address a faucet payout may go to. */
  let agent: { key_ref: string; address: Address };

  beforeAll(async () => {
    devnet = await startDevnet({ port: 0 });
    fixture = await createEnclaveFixture({ envId: "devnet-env" });
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    await privileged(client, fixture, "configure_policy", {
      per_tx_limit_units: "5000000",
      daily_limit_units: "5000000",
      recipient_allowlist: null,
      x402_amount_units: null,
      x402_pay_to: null,
      x402_max_timeout_seconds: 180,
      operator_pool: DEV_OPERATOR_POOL_ADDRESS,
      fee_ceiling_wei: FEE_CEILING_WEI,
      x402_validity_margin_seconds: 6,
      x402_daily_limit: 1000,
      settler_daily_fee_units: "1000000000",
    });
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "agent-transfer",
      count: 1,
      batch_id: "devnet-batch",
    });
    agent = (batch.keys as Array<{ key_ref: string; address: Address }>)[0]!;
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
    await devnet?.close();
  });

  /** Signs with the enclave, broadcasts, and returns the receipt. */
  const signAndSend = async (
    op: "sign_transfer" | "sign_faucet",
    keyRef: string,
    from: Address,
    valueUnits: bigint,
    to: Address = RECIPIENT,
  ) => {
    const chain = publicClientFor(devnet.url);
    const fees = await chain.estimateFeesPerGas();
    const signed = expectOk(
      await client.request(op, {
        key_ref: keyRef,
        from,
        chain_id: CHAIN_ID,
        to,
        value_units: valueUnits.toString(),
        nonce: String(await chain.getTransactionCount({ address: from })),
        max_fee_per_gas: fees.maxFeePerGas.toString(),
        max_priority_fee_per_gas: fees.maxPriorityFeePerGas.toString(),
        gas_limit: "21000",
      }),
    );
    const hash = await chain.sendRawTransaction({
      serializedTransaction: signed.raw_transaction as `0x02${string}`,
    });
    expect(hash).toBe(signed.tx_hash);
    return chain.waitForTransactionReceipt({ hash, timeout: 10_000 });
  };

  it("accepts an agent transfer signed by the enclave: receipt success, value moved in wei", async () => {
    const key = agent;
    await fund(devnet.url, key!.address, 10n ** 20n); // 100 USDC, in wei
    const chain = publicClientFor(devnet.url);
    const before = await chain.getBalance({ address: RECIPIENT });
    const receipt = await signAndSend("sign_transfer", key!.key_ref, key!.address, 1_500_000n);
    expect(receipt.status).toBe("success");
    expect(receipt.from.toLowerCase()).toBe(key!.address.toLowerCase());
    expect((await chain.getBalance({ address: RECIPIENT })) - before).toBe(1_500_000n * WEI_PER_UNIT);
  });

  it("accepts a faucet payout signed with the treasury's faucet key", async () => {
    const treasury = await privileged(client, fixture, "configure_treasury", {
      budget_units: "2000000",
      payout_units: "1000000",
      cooldown_ms: 60_000,
      daily_limit_units: "1000000",
    });
    const faucetAddress = treasury.faucet_address as Address;
    await fund(devnet.url, faucetAddress, 10n ** 20n); // 100 USDC, in wei
    const chain = publicClientFor(devnet.url);
    const before = await chain.getBalance({ address: agent.address });
    const receipt = await signAndSend(
      "sign_faucet",
      treasury.faucet_key_ref as string,
      faucetAddress,
      1_000_000n,
      agent.address,
    );
    expect(receipt.status).toBe("success");
    expect(receipt.from.toLowerCase()).toBe(faucetAddress.toLowerCase());
    expect((await chain.getBalance({ address: agent.address })) - before).toBe(1_000_000n * WEI_PER_UNIT);
  });

  it("settles an x402 authorization signed by the enclave through the NativeTransferAuth precompile", async () => {
    const payTo: Address = "0x2222222222222222222222222222222222222222";
    await privileged(client, fixture, "configure_policy", {
      per_tx_limit_units: "0",
      daily_limit_units: "0",
      recipient_allowlist: null,
      x402_amount_units: "10000",
      x402_pay_to: payTo,
      x402_max_timeout_seconds: 180,
      operator_pool: DEV_OPERATOR_POOL_ADDRESS,
      fee_ceiling_wei: FEE_CEILING_WEI,
      x402_validity_margin_seconds: 6,
      x402_daily_limit: 1000,
      settler_daily_fee_units: "1000000000",
    });
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "agent-transfer",
      count: 1,
      batch_id: "devnet-x402",
    });
    const [payer] = batch.keys as Array<{ key_ref: string; address: Address }>;
    await fund(devnet.url, payer!.address, 10n ** 18n);
    const validBefore = BigInt(Math.floor(Date.now() / 1000) + 120);
    const signed = expectOk(
      await client.request("sign_x402_authorization", {
        key_ref: payer!.key_ref,
        from: payer!.address,
        to: payTo,
        value_units: "10000",
        valid_after: "0",
        valid_before: validBefore.toString(),
        nonce: `0x${"42".repeat(32)}`,
      }),
    );
    const settler = newAccount();
    await fund(devnet.url, settler.address, 10n ** 18n);
    const chain = publicClientFor(devnet.url);
    const before = await chain.getBalance({ address: payTo });
    const hash = await walletClientFor(devnet.url, settler).writeContract({
      address: NATIVE_TRANSFER_AUTH_ADDRESS,
      abi: NATIVE_TRANSFER_AUTH_ABI,
      functionName: "transferWithAuthorization",
      args: [
        payer!.address,
        payTo,
        10_000n,
        0n,
        validBefore,
        `0x${"42".repeat(32)}`,
        signed.signature as `0x${string}`,
      ],
    });
    const receipt = await chain.waitForTransactionReceipt({ hash, timeout: 10_000 });
    expect(receipt.status).toBe("success");
    expect((await chain.getBalance({ address: payTo })) - before).toBe(10_000n * WEI_PER_UNIT);
  });

  /**
   * Asks the enclave to sign a zero-value transaction whose maximum fee is nearly the whole balance
   * of `from`, and broadcasts whatever it signs, as a compromised origin would.
   */
  const attemptFeeDrain = async (
    op: "sign_transfer" | "sign_faucet",
    keyRef: string,
    from: Address,
    to: Address = RECIPIENT,
  ) => {
    const chain = publicClientFor(devnet.url);
    const response = await client.request(op, {
      key_ref: keyRef,
      from,
      chain_id: CHAIN_ID,
      to,
      value_units: "0",
      nonce: String(await chain.getTransactionCount({ address: from })),
      max_fee_per_gas: DRAIN_FEE_PER_GAS,
      max_priority_fee_per_gas: DRAIN_FEE_PER_GAS,
      gas_limit: "21000",
    });
    if (response.ok) {
      const hash = await chain.sendRawTransaction({
        serializedTransaction: (response.result as { raw_transaction: `0x02${string}` }).raw_transaction,
      });
      await chain.waitForTransactionReceipt({ hash, timeout: 10_000 });
    }
    return { response, balance: await chain.getBalance({ address: from }) };
  };

  it("refuses a fee-only drain of an agent wallet under limits of 0: nothing signed, the balance unchanged", async () => {
    await privileged(client, fixture, "configure_policy", {
      per_tx_limit_units: "0",
      daily_limit_units: "0",
      recipient_allowlist: null,
      x402_amount_units: null,
      x402_pay_to: null,
      x402_max_timeout_seconds: 180,
      operator_pool: DEV_OPERATOR_POOL_ADDRESS,
      fee_ceiling_wei: FEE_CEILING_WEI,
      x402_validity_margin_seconds: 6,
      x402_daily_limit: 1000,
      settler_daily_fee_units: "1000000000",
    });
    const batch = await privileged(client, fixture, "generate_keys", {
      namespace: "agent-transfer",
      count: 1,
      batch_id: "devnet-fee-drain",
    });
    const [wallet] = batch.keys as Array<{ key_ref: string; address: Address }>;
    await fund(devnet.url, wallet!.address, WALLET_BALANCE_WEI);
    const { response, balance } = await attemptFeeDrain("sign_transfer", wallet!.key_ref, wallet!.address);
    expect(balance).toBe(WALLET_BALANCE_WEI);
    expect(response).toMatchObject({ ok: false, error: { code: "cap_exceeded" } });
  });

  it("refuses a fee-only drain of the faucet treasury under a budget of 0: nothing signed, the balance unchanged", async () => {
    // A payout of 0 to an agent key, so only the fee bounds (ceiling, budget) can refuse it.
    const treasury = await privileged(client, fixture, "configure_treasury", {
      budget_units: "0",
      payout_units: "0",
      cooldown_ms: 0,
      daily_limit_units: "0",
    });
    const faucetAddress = treasury.faucet_address as Address;
    await fund(devnet.url, faucetAddress, WALLET_BALANCE_WEI);
    const { response, balance } = await attemptFeeDrain(
      "sign_faucet",
      treasury.faucet_key_ref as string,
      faucetAddress,
      agent.address,
    );
    expect(balance).toBe(WALLET_BALANCE_WEI);
    expect(response).toMatchObject({ ok: false, error: { code: "cap_exceeded" } });
  });
});
