import { type Address, type Hex, parseTransaction, recoverTransactionAddress } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";
import { nativeTransferAuthDomain, TRANSFER_WITH_AUTHORIZATION_TYPES } from "../shared/eip712.ts";
import type { EnclaveResponse } from "../shared/enclave-protocol.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { privileged } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// A compromised origin hands sign_settlement whatever it likes, straight over the socket: the
// enclave recovers the authorization's signer, checks it is `from`, and checks the validity window
// against its own clock with the sealed margin, so the settler never pays gas for a payment the
// precompile would refuse (docs/x402.md; docs/enclave.md).

const PAY_TO: Address = "0x2222222222222222222222222222222222222222";
const AMOUNT = 10_000n;
const MARGIN_SECONDS = 6;
/** secp256k1's order: a signature's S above half of it is the high-S twin (EIP-2). */
const CURVE_ORDER = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;

type Authorization = {
  from: Address;
  to: Address;
  value: bigint;
  validAfter: bigint;
  validBefore: bigint;
  nonce: Hex;
};

const nowSeconds = (): bigint => BigInt(Math.floor(Date.now() / 1000));
let nonces = 0;
const freshNonce = (): Hex => `0x${(++nonces).toString(16).padStart(64, "0")}`;

describe("sign_settlement checks the authorization it pays gas for (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  let settler: { key_ref: string; address: Address };
  const payer = privateKeyToAccount(generatePrivateKey());
  const stranger = privateKeyToAccount(generatePrivateKey());

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "settlement-env" });
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
    await privileged(client, fixture, "configure_policy", {
      per_tx_limit_units: "0",
      daily_limit_units: "0",
      recipient_allowlist: null,
      x402_amount_units: AMOUNT.toString(),
      x402_pay_to: PAY_TO,
      x402_max_timeout_seconds: 180,
      operator_pool: "0x00000000000000000000000000000000000000aa",
      fee_ceiling_wei: "1000000000000000",
      x402_validity_margin_seconds: MARGIN_SECONDS,
      x402_daily_limit: 1000,
      settler_daily_fee_units: "1000000000",
    });
    const made = await privileged(client, fixture, "configure_settler", {});
    settler = { key_ref: made.settler_key_ref as string, address: made.settler_address as Address };
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  const authorization = (change: Partial<Authorization> = {}): Authorization => ({
    from: payer.address,
    to: PAY_TO,
    value: AMOUNT,
    validAfter: 0n,
    validBefore: nowSeconds() + 120n,
    nonce: freshNonce(),
    ...change,
  });
  const signedBy = (account: typeof payer, message: Authorization): Promise<Hex> =>
    account.signTypedData({
      domain: nativeTransferAuthDomain(),
      types: TRANSFER_WITH_AUTHORIZATION_TYPES,
      primaryType: "TransferWithAuthorization",
      message,
    });
  const settle = (
    message: Authorization,
    signature: Hex,
    fees: { max_fee_per_gas?: string; gas_limit?: string; chain_id?: number } = {},
  ): Promise<EnclaveResponse> =>
    client.request("sign_settlement", {
      key_ref: settler.key_ref,
      chain_id: CHAIN_ID,
      authorization: {
        from: message.from.toLowerCase(),
        to: message.to.toLowerCase(),
        value: message.value.toString(),
        valid_after: message.validAfter.toString(),
        valid_before: message.validBefore.toString(),
        nonce: message.nonce,
      },
      signature: signature.toLowerCase(),
      nonce: "0",
      max_fee_per_gas: "1000",
      max_priority_fee_per_gas: "1",
      gas_limit: "100000",
      ...fees,
    });
  /** What the origin switches on, and what a person reads. */
  const refusal = (response: EnclaveResponse) =>
    response.ok ? "signed" : { code: response.error.code, detail: response.error.detail };

  it("signs the precompile call for an authorization its `from` signed, valid by the margin", async () => {
    const message = authorization();
    const result = expectOk(await settle(message, await signedBy(payer, message)));
    const raw = result.raw_transaction as `0x02${string}`;
    const tx = parseTransaction(raw);
    expect(tx.to).toBe(NATIVE_TRANSFER_AUTH_ADDRESS);
    expect(tx.value ?? 0n).toBe(0n); // a zero value is left out of the encoding
    expect(await recoverTransactionAddress({ serializedTransaction: raw })).toBe(settler.address);
  });

  it("refuses a fee over the sealed ceiling, another amount, another payTo and a payer from the operator pool, each by name", async () => {
    // Mutations: dropping any one of the four checks signs (or refuses by another name) its case.
    const cases: Array<[string, Partial<Authorization>, { max_fee_per_gas?: string }, string]> = [
      // 100000 gas × 10^10 + 1 wei is over the 10^15 wei ceiling.
      ["fee over the ceiling", {}, { max_fee_per_gas: "10000000001" }, "fee_ceiling"],
      ["one unit more", { value: AMOUNT + 1n }, {}, "x402_amount"],
      ["one unit less", { value: AMOUNT - 1n }, {}, "x402_amount"],
      ["another payTo", { to: "0x3333333333333333333333333333333333333333" }, {}, "x402_pay_to"],
      ["from the operator pool", { from: "0x00000000000000000000000000000000000000aa" }, {}, "x402_payer"],
    ];
    const answers: Array<[string, unknown]> = [];
    for (const [name, change, fees] of cases) {
      const message = authorization(change);
      answers.push([name, refusal(await settle(message, await signedBy(payer, message), fees))]);
    }
    expect(answers).toEqual(cases.map(([name, , , detail]) => [name, { code: "cap_exceeded", detail }]));
    // At the ceiling exactly it signs.
    const message = authorization();
    expect(
      refusal(await settle(message, await signedBy(payer, message), { max_fee_per_gas: "10000000000" })),
    ).toBe("signed");
  });

  it("refuses a settlement for another chain by name, though everything else would sign", async () => {
    // Mutation: dropping sign_settlement's chain id check signs it (for the sealed chain).
    const message = authorization();
    const signature = await signedBy(payer, message);
    expect(refusal(await settle(message, signature, { chain_id: CHAIN_ID + 1 }))).toEqual({
      code: "cap_exceeded",
      detail: "chain",
    });
    expect(refusal(await settle(message, signature))).toBe("signed");
  });

  it("refuses a gas limit over the enclave's bound by name, though its fee is under the ceiling", async () => {
    const over = authorization();
    // 500001 gas × 1000 wei is far under the 10^15 wei ceiling: only the gas bound refuses it.
    // Mutation: dropping sign_settlement's MAX_GAS_LIMIT check signs this.
    expect(refusal(await settle(over, await signedBy(payer, over), { gas_limit: "500001" }))).toEqual({
      code: "cap_exceeded",
      detail: "gas_limit",
    });
    const at = authorization();
    expect(refusal(await settle(at, await signedBy(payer, at), { gas_limit: "500000" }))).toBe("signed");
  });

  it("refuses an expired authorization, one not valid yet by the margin and one that expires within it, by name", async () => {
    const now = nowSeconds();
    const windows: Array<[string, Partial<Authorization>]> = [
      ["expired ten seconds ago", { validBefore: now - 10n }],
      ["validAfter is now", { validAfter: now }],
      ["validBefore within the margin", { validBefore: now + BigInt(MARGIN_SECONDS) - 3n }],
      ["valid longer than the sealed maximum", { validBefore: now + 600n }],
    ];
    const answers: Array<[string, unknown]> = [];
    for (const [name, change] of windows) {
      const message = authorization(change);
      answers.push([name, refusal(await settle(message, await signedBy(payer, message)))]);
    }
    expect(answers).toEqual(
      windows.map(([name]) => [name, { code: "cap_exceeded", detail: "settlement_window" }]),
    );
  });

  it("refuses a junk signature, another key's signature, v = 29 or 2 and a high-S twin, by name and never as an internal error", async () => {
    const message = authorization();
    const good = await signedBy(payer, message);
    const r = good.slice(2, 66);
    const s = BigInt(`0x${good.slice(66, 130)}`);
    const v = Number.parseInt(good.slice(130, 132), 16);
    const twin: Hex = `0x${r}${(CURVE_ORDER - s).toString(16).padStart(64, "0")}${(v === 27 ? 28 : 27).toString(16)}`;
    const cases: Array<[string, Hex, string]> = [
      ["a junk signature", `0x${"11".repeat(64)}1b`, "cap_exceeded"],
      ["signed by another key than from", await signedBy(stranger, message), "cap_exceeded"],
      ["v = 29", `0x${good.slice(2, 130)}1d`, "malformed"],
      ["v = 2", `0x${good.slice(2, 130)}02`, "malformed"],
      ["the high-S twin of from's signature", twin, "malformed"],
    ];
    const answers: Array<[string, unknown]> = [];
    for (const [name, signature] of cases) answers.push([name, refusal(await settle(message, signature))]);
    expect(answers).toEqual(cases.map(([name, , code]) => [name, { code, detail: "settlement_signature" }]));
    // The same authorization with its own signature still signs, also with v as its parity (0 or
    // 1, as some wallets write it): only the signature was refused.
    expectOk(await settle(message, good));
    expectOk(await settle(message, `0x${good.slice(2, 130)}0${v - 27}` as Hex));
    // An exception would have been answered seal_failed and logged as "op failed".
    expect(fixture.stderr()).not.toContain("op failed");
  });
});
