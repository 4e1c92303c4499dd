import {
  type Address,
  domainSeparator,
  encodeAbiParameters,
  encodeFunctionData,
  type Hex,
  keccak256,
  parseEventLogs,
  parseSignature,
  serializeSignature,
  toHex,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  CHAIN_ID,
  EIP712_DOMAIN_NAME,
  EIP712_DOMAIN_VERSION,
  NATIVE_TRANSFER_AUTH_ADDRESS,
  WEI_PER_UNIT,
} from "../../shared/constants.ts";
import { errorMessage } from "../../shared/error-message.ts";
import {
  DEV_OPERATOR_POOL_PRIVATE_KEY,
  type Devnet,
  NATIVE_TRANSFER_AUTH_ABI,
  REVERT_REASONS,
  startDevnet,
  TRANSFER_GAS,
} from "../index.ts";
import {
  fund,
  newAccount,
  publicClientFor,
  signTransferAuthorization,
  type TransferAuthorization,
  transferAuthorization,
  transferWithAuthorizationCalldata,
  usdc,
  walletClientFor,
} from "../testing.ts";

const PRECOMPILE = NATIVE_TRANSFER_AUTH_ADDRESS;
const SECP256K1_N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
const DOMAIN = {
  name: EIP712_DOMAIN_NAME,
  version: EIP712_DOMAIN_VERSION,
  chainId: CHAIN_ID,
  verifyingContract: PRECOMPILE,
} as const;

function vrsCalldata(auth: TransferAuthorization, signature: Hex): Hex {
  return transferWithAuthorizationCalldata(auth, signature, "vrs");
}

function bytesCalldata(auth: TransferAuthorization, signature: Hex): Hex {
  return transferWithAuthorizationCalldata(auth, signature, "bytes");
}

/** The signature with S flipped to n − S and v flipped: valid ECDSA, but high-S (EIP-2). */
function highS(signature: Hex): Hex {
  const { r, s, yParity } = parseSignature(signature);
  const flipped = SECP256K1_N - BigInt(s);
  return serializeSignature({ r, s: toHex(flipped, { size: 32 }), yParity: yParity === 0 ? 1 : 0 });
}

describe("devnet: NativeTransferAuth precompile", () => {
  let devnet: Devnet;
  let url: string;
  const relayer = newAccount();

  beforeAll(async () => {
    devnet = await startDevnet({ port: 0 });
    url = devnet.url;
    await fund(url, relayer.address, usdc(100n));
  });
  afterAll(async () => {
    await devnet.close();
  });

  /** The relayer (a third account) submits `data` to the precompile; gas given skips estimation. */
  async function submit(data: Hex, gas?: bigint) {
    const hash = await walletClientFor(url, relayer).sendTransaction({ to: PRECOMPILE, data, gas });
    return publicClientFor(url).waitForTransactionReceipt({ hash });
  }

  async function balances(...addresses: Address[]): Promise<bigint[]> {
    const client = publicClientFor(url);
    return Promise.all(addresses.map((address) => client.getBalance({ address })));
  }

  async function callReason(data: Hex): Promise<string> {
    try {
      await publicClientFor(url).call({ account: relayer.address, to: PRECOMPILE, data });
    } catch (error) {
      return errorMessage(error);
    }
    return "did not revert";
  }

  it("answers the token views", async () => {
    const client = publicClientFor(url);
    const read = <F extends "name" | "version" | "decimals" | "DOMAIN_SEPARATOR">(functionName: F) =>
      client.readContract({ address: PRECOMPILE, abi: NATIVE_TRANSFER_AUTH_ABI, functionName });
    expect(await read("name")).toBe("USDC");
    expect(await read("version")).toBe("2");
    expect(await read("decimals")).toBe(6);
    expect(await read("DOMAIN_SEPARATOR")).toBe(domainSeparator({ domain: DOMAIN }));
    const holder = newAccount();
    await fund(url, holder.address, 1_234_567n * WEI_PER_UNIT + 999n);
    expect(
      await client.readContract({
        address: PRECOMPILE,
        abi: NATIVE_TRANSFER_AUTH_ABI,
        functionName: "balanceOf",
        args: [holder.address],
      }),
    ).toBe(1_234_567n);
  });

  it("settles a signed authorization submitted by a third account, with both events, once", async () => {
    const client = publicClientFor(url);
    const payer = newAccount();
    const payee = newAccount();
    await fund(url, payer.address, usdc(10n));
    const auth = transferAuthorization(payer.address, payee.address, 2_500_000n);
    const signature = await signTransferAuthorization(payer, auth);
    const [payerBefore, payeeBefore, relayerBefore] = await balances(
      payer.address,
      payee.address,
      relayer.address,
    );

    const receipt = await submit(vrsCalldata(auth, signature));

    expect(receipt.status).toBe("success");
    const moved = auth.value * WEI_PER_UNIT;
    const [payerAfter, payeeAfter, relayerAfter] = await balances(
      payer.address,
      payee.address,
      relayer.address,
    );
    expect(payerAfter).toBe(payerBefore! - moved);
    expect(payeeAfter).toBe(payeeBefore! + moved);
    expect(relayerAfter).toBe(relayerBefore! - receipt.gasUsed * receipt.effectiveGasPrice);

    const events = parseEventLogs({ abi: NATIVE_TRANSFER_AUTH_ABI, logs: receipt.logs });
    expect(events.map((event) => event.eventName)).toEqual(["AuthorizationUsed", "Transfer"]);
    expect(events[0]?.address).toBe(PRECOMPILE);
    expect(events[0]?.args).toEqual({ authorizer: payer.address, nonce: auth.nonce });
    expect(events[1]?.args).toEqual({ from: payer.address, to: payee.address, value: auth.value });
    expect(receipt.logs[1]?.logIndex).toBe(1);

    expect(
      await client.readContract({
        address: PRECOMPILE,
        abi: NATIVE_TRANSFER_AUTH_ABI,
        functionName: "authorizationState",
        args: [payer.address, auth.nonce],
      }),
    ).toBe(true);
    // Stored where Solidity keeps mapping(address => mapping(bytes32 => bool)) at slot 0.
    const inner = keccak256(
      encodeAbiParameters([{ type: "address" }, { type: "uint256" }], [payer.address, 0n]),
    );
    const slot = keccak256(
      encodeAbiParameters([{ type: "bytes32" }, { type: "bytes32" }], [auth.nonce, inner]),
    );
    expect(await client.getStorageAt({ address: PRECOMPILE, slot })).toBe(toHex(1, { size: 32 }));

    // The same (from, nonce) again: eth_call names the reason, a mined attempt reverts and moves nothing.
    expect(await callReason(vrsCalldata(auth, signature))).toContain(REVERT_REASONS.used);
    const replay = await submit(vrsCalldata(auth, signature), 200_000n);
    expect(replay.status).toBe("reverted");
    expect(replay.logs).toEqual([]);
    expect(await balances(payer.address, payee.address)).toEqual([payerAfter, payeeAfter]);
  });

  it("accepts the `bytes signature` variant and prices it as estimated", async () => {
    const client = publicClientFor(url);
    const payer = newAccount();
    const payee = newAccount();
    await fund(url, payer.address, usdc(1n));
    const auth = transferAuthorization(payer.address, payee.address, 10_000n);
    const data = bytesCalldata(auth, await signTransferAuthorization(payer, auth));
    const estimate = await client.estimateGas({ account: relayer.address, to: PRECOMPILE, data });
    const receipt = await submit(data);
    expect(receipt.status).toBe("success");
    expect(receipt.gasUsed).toBe(estimate);
    expect(receipt.gasUsed).toBeGreaterThan(21_000n + TRANSFER_GAS);
    expect(await client.getBalance({ address: payee.address })).toBe(10_000n * WEI_PER_UNIT);
  });

  it("refuses the operator pool as `from`", async () => {
    const pool = privateKeyToAccount(DEV_OPERATOR_POOL_PRIVATE_KEY);
    const payee = newAccount();
    const auth = transferAuthorization(pool.address, payee.address, 1_000n);
    const data = vrsCalldata(auth, await signTransferAuthorization(pool, auth));
    expect(await callReason(data)).toContain(REVERT_REASONS.operatorPool);
    const [poolBefore] = await balances(pool.address);
    const receipt = await submit(data, 200_000n);
    expect(receipt.status).toBe("reverted");
    expect(await balances(pool.address, payee.address)).toEqual([poolBefore, 0n]);
  });

  it("refuses expired and not-yet-valid authorizations", async () => {
    const payer = newAccount();
    const payee = newAccount();
    await fund(url, payer.address, usdc(1n));
    const now = BigInt(Math.floor(Date.now() / 1000));
    const expired = transferAuthorization(payer.address, payee.address, 1_000n, { validBefore: now - 1n });
    const expiredData = vrsCalldata(expired, await signTransferAuthorization(payer, expired));
    expect(await callReason(expiredData)).toContain(REVERT_REASONS.expired);
    expect((await submit(expiredData, 200_000n)).status).toBe("reverted");

    const early = transferAuthorization(payer.address, payee.address, 1_000n, { validAfter: now + 3_600n });
    const earlyData = vrsCalldata(early, await signTransferAuthorization(payer, early));
    expect(await callReason(earlyData)).toContain(REVERT_REASONS.notYetValid);
    expect((await submit(earlyData, 200_000n)).status).toBe("reverted");
    expect(await balances(payer.address, payee.address)).toEqual([usdc(1n), 0n]);
  });

  it("refuses high-S, foreign and malformed signatures", async () => {
    const payer = newAccount();
    const payee = newAccount();
    await fund(url, payer.address, usdc(1n));
    const auth = transferAuthorization(payer.address, payee.address, 1_000n);
    const signature = await signTransferAuthorization(payer, auth);

    expect(await callReason(vrsCalldata(auth, highS(signature)))).toContain(REVERT_REASONS.invalidS);
    expect(await callReason(bytesCalldata(auth, highS(signature)))).toContain(REVERT_REASONS.invalidS);
    expect((await submit(vrsCalldata(auth, highS(signature)), 200_000n)).status).toBe("reverted");

    const foreign = await signTransferAuthorization(newAccount(), auth);
    expect(await callReason(vrsCalldata(auth, foreign))).toContain(REVERT_REASONS.invalidSignature);
    const tampered = { ...auth, value: 2_000n };
    expect(await callReason(vrsCalldata(tampered, signature))).toContain(REVERT_REASONS.invalidSignature);
    expect(await callReason(bytesCalldata(auth, `${signature.slice(0, -2)}` as Hex))).toContain(
      REVERT_REASONS.invalidSignatureLength,
    );
    expect(await balances(payer.address, payee.address)).toEqual([usdc(1n), 0n]);

    // The genuine signature still works: failed attempts did not use the nonce.
    expect((await submit(vrsCalldata(auth, signature))).status).toBe("success");
  });

  it("refuses a transfer above the balance, and cannot mint", async () => {
    const payer = newAccount();
    const payee = newAccount();
    await fund(url, payer.address, 999_999n * WEI_PER_UNIT);
    const auth = transferAuthorization(payer.address, payee.address, 1_000_000n);
    const data = vrsCalldata(auth, await signTransferAuthorization(payer, auth));
    expect(await callReason(data)).toContain(REVERT_REASONS.insufficientBalance);
    expect((await submit(data, 200_000n)).status).toBe("reverted");
    expect(await balances(payer.address, payee.address)).toEqual([999_999n * WEI_PER_UNIT, 0n]);
  });

  it("refuses value sent along, and leaves the value with the sender", async () => {
    const payer = newAccount();
    const payee = newAccount();
    await fund(url, payer.address, usdc(1n));
    const auth = transferAuthorization(payer.address, payee.address, 1_000n);
    const data = vrsCalldata(auth, await signTransferAuthorization(payer, auth));
    const hash = await walletClientFor(url, relayer).sendTransaction({
      to: PRECOMPILE,
      data,
      value: 5n,
      gas: 200_000n,
    });
    const receipt = await publicClientFor(url).waitForTransactionReceipt({ hash });
    expect(receipt.status).toBe("reverted");
    expect(await balances(PRECOMPILE, payee.address)).toEqual([0n, 0n]);
  });

  describe("called from a contract", () => {
    /**
     * Runtime code that forwards its calldata to the precompile with `opcode` (CALL, STATICCALL
     * or DELEGATECALL) and returns the success flag as a word.
     */
    function forwarder(kind: "call" | "staticcall" | "delegatecall"): Hex {
      const opcode = { call: "f1", staticcall: "fa", delegatecall: "f4" }[kind];
      const runtime = [
        "366000600037", // calldatacopy(0, 0, calldatasize)
        "6000600036", // retSize 0, retOffset 0, argsSize calldatasize
        "6000", // argsOffset 0
        kind === "call" ? "6000" : "", // value 0 (CALL only)
        `73${PRECOMPILE.slice(2)}`, // the precompile
        `5a${opcode}`, // gas, then the call
        "60005260206000f3", // mstore(0, success); return(0, 32)
      ].join("");
      // Init code: copy the runtime (which starts at byte 11) to memory and return it.
      const init = `60${(runtime.length / 2).toString(16).padStart(2, "0")}80600b6000396000f3`;
      return `0x${init}${runtime}`;
    }

    async function deploy(code: Hex): Promise<Address> {
      const hash = await walletClientFor(url, relayer).sendTransaction({ data: code });
      const receipt = await publicClientFor(url).waitForTransactionReceipt({ hash });
      expect(receipt.status).toBe("success");
      return receipt.contractAddress!;
    }

    it("settles through CALL with the events in the receipt, and refuses STATICCALL and DELEGATECALL", async () => {
      const client = publicClientFor(url);
      const payer = newAccount();
      const payee = newAccount();
      await fund(url, payer.address, usdc(1n));
      const viaCall = await deploy(forwarder("call"));
      const viaStatic = await deploy(forwarder("staticcall"));
      const viaDelegate = await deploy(forwarder("delegatecall"));
      const auth = transferAuthorization(payer.address, payee.address, 7_000n);
      const data = vrsCalldata(auth, await signTransferAuthorization(payer, auth));

      const success = `0x${"0".repeat(63)}1`;
      const failure = `0x${"0".repeat(64)}`;
      expect(await client.call({ to: viaStatic, data })).toEqual({ data: failure });
      expect(await client.call({ to: viaDelegate, data })).toEqual({ data: failure });
      expect(await client.call({ to: viaCall, data })).toEqual({ data: success });
      // Views stay available to static and delegated callers; only the write is refused.
      const view = encodeFunctionData({
        abi: NATIVE_TRANSFER_AUTH_ABI,
        functionName: "authorizationState",
        args: [payer.address, auth.nonce],
      });
      expect(await client.call({ to: viaStatic, data: view })).toEqual({ data: success });
      expect(await client.call({ to: viaDelegate, data: view })).toEqual({ data: success });

      const hash = await walletClientFor(url, relayer).sendTransaction({ to: viaCall, data, gas: 300_000n });
      const receipt = await client.waitForTransactionReceipt({ hash });
      expect(receipt.status).toBe("success");
      const events = parseEventLogs({ abi: NATIVE_TRANSFER_AUTH_ABI, logs: receipt.logs });
      expect(events.map((event) => event.eventName)).toEqual(["AuthorizationUsed", "Transfer"]);
      expect(await client.getBalance({ address: payee.address })).toBe(7_000n * WEI_PER_UNIT);
    });
  });
});
