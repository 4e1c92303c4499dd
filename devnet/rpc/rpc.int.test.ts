import {
  type Address,
  BaseError,
  concat,
  ExecutionRevertedError,
  FeeCapTooLowError,
  getAbiItem,
  type Hex,
  InsufficientFundsError,
  keccak256,
  parseGwei,
  TipAboveFeeCapError,
  toHex,
  toRlp,
  trim,
} from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount, sign } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { NATIVE_TRANSFER_AUTH_ADDRESS } from "../../shared/constants.ts";
import { TRANSFER_TOPIC } from "../chain/precompile/abi.ts";
import { type Devnet, NATIVE_TRANSFER_AUTH_ABI, REVERT_REASONS, startDevnet } from "../index.ts";
import {
  fund,
  newAccount,
  publicClientFor,
  type RpcAnswer,
  rpc,
  rpcBatch,
  setNextBaseFee,
  signTransferAuthorization,
  transferAuthorization,
  transferWithAuthorizationCalldata,
  usdc,
  walletClientFor,
} from "../testing.ts";

async function post(url: string, body: unknown): Promise<{ status: number; json: unknown }> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, json: text === "" ? undefined : JSON.parse(text) };
}

/** A signed precompile transfer of `value` units from `payer` to `payee`, as calldata. */
async function transferCalldata(payer: PrivateKeyAccount, payee: Address, value: bigint): Promise<Hex> {
  const auth = transferAuthorization(payer.address, payee, value);
  return transferWithAuthorizationCalldata(auth, await signTransferAuthorization(payer, auth));
}

describe("devnet: JSON-RPC protocol", () => {
  let devnet: Devnet;
  let url: string;

  beforeAll(async () => {
    devnet = await startDevnet({ port: 0 });
    url = devnet.url;
  });
  afterAll(async () => {
    await devnet.close();
  });

  it("answers a batch in order, with -32601 for an unknown method", async () => {
    const { status, json } = await post(url, [
      { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] },
      { jsonrpc: "2.0", id: "two", method: "eth_blockNumber" },
      { jsonrpc: "2.0", id: 3, method: "eth_sendTransaction", params: [{}] },
      { jsonrpc: "2.0", id: 4, method: "net_version", params: [] },
      { jsonrpc: "2.0", method: "eth_chainId", params: [] },
    ]);
    expect(status).toBe(200);
    expect(json).toEqual([
      { jsonrpc: "2.0", id: 1, result: "0x4d" },
      { jsonrpc: "2.0", id: "two", result: "0x0" },
      {
        jsonrpc: "2.0",
        id: 3,
        error: { code: -32601, message: "the method eth_sendTransaction does not exist/is not available" },
      },
      { jsonrpc: "2.0", id: 4, result: "77" },
    ]);
  });

  it("answers malformed requests with the JSON-RPC error codes", async () => {
    expect((await rpc(url, "eth_nope")).error).toMatchObject({ code: -32601 });
    expect((await rpc(url, "eth_getBalance", ["0x1234", "latest"])).error).toMatchObject({
      code: -32602,
      message: "invalid argument 0: not a 20-byte hex address",
    });
    expect((await rpc(url, "eth_getBalance", [])).error).toMatchObject({ code: -32602 });
    expect((await rpc(url, "eth_getBlockByNumber", ["0x0", "yes"])).error).toMatchObject({ code: -32602 });
    expect((await post(url, "{not json")).json).toMatchObject({ id: null, error: { code: -32700 } });
    expect((await post(url, [])).json).toMatchObject({ id: null, error: { code: -32600 } });
    expect((await post(url, { id: 9, method: "eth_chainId" })).json).toMatchObject({
      id: 9,
      error: { code: -32600 },
    });
    expect((await post(url, { jsonrpc: "2.0", method: "eth_chainId" })).status).toBe(204);
    expect((await rpc(url, "eth_getBalance", [newAccount().address, "0x99999"])).error).toMatchObject({
      code: -32000,
      message: "header not found",
    });
  });

  it("refuses a transaction for another chain, or with its tip above its fee cap, in geth's words", async () => {
    // Mutation: ethereumjs's decoding errors passed on: "invalid transaction: Common chain ID
    // chainId() {\n return BigInt(…" (the source of a function) and "maxFeePerGas cannot be less
    // than maxPriorityFeePerGas …", which viem cannot classify.
    const senderKey = generatePrivateKey();
    const sender = privateKeyToAccount(senderKey);
    await fund(url, sender.address, usdc(1n));
    const to = newAccount().address;
    const fees = { maxFeePerGas: parseGwei("30"), maxPriorityFeePerGas: parseGwei("1") };
    const forMainnet = await sender.signTransaction({
      chainId: 1,
      type: "eip1559",
      to,
      nonce: 0,
      gas: 21_000n,
      ...fees,
    });
    const legacyForMainnet = await sender.signTransaction({
      chainId: 1,
      type: "legacy",
      to,
      nonce: 0,
      gas: 21_000n,
      gasPrice: parseGwei("30"),
    });
    for (const raw of [forMainnet, legacyForMainnet]) {
      expect((await rpc(url, "eth_sendRawTransaction", [raw])).error).toEqual({
        code: -32000,
        message: "invalid sender: invalid chain id for signer: have 1 want 77",
      });
    }
    // viem will not sign a tip above the fee cap; other clients do, and geth's pool refuses it.
    const unsigned = [toHex(77), "0x", toHex(20n), toHex(10n), toHex(21_000n), to, "0x", "0x", []] as const;
    const signature = await sign({
      hash: keccak256(concat(["0x02", toRlp(unsigned as unknown as Hex[])])),
      privateKey: senderKey,
    });
    const tipAboveCap = concat([
      "0x02",
      toRlp([
        ...(unsigned as unknown as Hex[]),
        signature.yParity === 1 ? "0x01" : "0x",
        trim(signature.r),
        trim(signature.s),
      ] as Hex[]),
    ]);
    const { error } = (await rpc(url, "eth_sendRawTransaction", [tipAboveCap])) as RpcAnswer;
    expect(error).toEqual({
      code: -32000,
      message:
        "max priority fee per gas higher than max fee per gas: maxPriorityFeePerGas: 20, maxFeePerGas: 10",
    });
    expect(TipAboveFeeCapError.nodeMessage.test(error!.message)).toBe(true);
  });

  it("serves the identity methods and a GET health document", async () => {
    expect((await rpc(url, "web3_clientVersion")).result).toMatch(/^agent-wallet-devnet\//);
    expect((await rpc(url, "net_version")).result).toBe("77");
    expect((await rpc(url, "eth_getBlockByNumber", ["0x999", false])).result).toBeNull();
    expect((await rpc(url, "eth_getTransactionByHash", [`0x${"ab".repeat(32)}`])).result).toBeNull();
    expect((await rpc(url, "eth_getTransactionReceipt", [`0x${"ab".repeat(32)}`])).result).toBeNull();
    const health = await fetch(url);
    expect(health.status).toBe(200);
    expect(await health.json()).toMatchObject({ status: "ok", chainId: "0x4d" });
  });

  it("reports a reverted eth_call and eth_estimateGas as geth does: code 3 with the revert data", async () => {
    const payer = newAccount();
    await fund(url, payer.address, usdc(1n));
    const data = await transferCalldata(payer, newAccount().address, 5_000_000n);
    for (const method of ["eth_call", "eth_estimateGas"]) {
      const { error } = await rpc(url, method, [{ to: NATIVE_TRANSFER_AUTH_ADDRESS, data }, "latest"]);
      expect(error).toMatchObject({
        code: 3,
        message: `execution reverted: ${REVERT_REASONS.insufficientBalance}`,
      });
      expect((error as { data: string }).data).toMatch(/^0x08c379a0/);
    }
    const bare = await rpc(url, "eth_call", [{ to: NATIVE_TRANSFER_AUTH_ADDRESS, data: "0xdeadbeef" }]);
    expect(bare.error).toEqual({ code: 3, message: "execution reverted", data: "0x" });
  });

  it("refuses a call or estimate it cannot run in geth's words, which viem classifies", async () => {
    // Mutation: fee and gas checks left to ethereumjs answer -32603 (its constructor throws on a
    // tip above the fee cap, or on gas beyond 2^64) or its message with a dump of the block and
    // transaction appended, which viem classifies as nothing (UnknownNodeError).
    const client = publicClientFor(url);
    const sender = newAccount();
    await fund(url, sender.address, usdc(1n));
    const to = newAccount().address;
    const nextBaseFee = BigInt((await rpc(url, "eth_gasPrice")).result as string) - 1_000_000_000n;
    for (const method of ["eth_call", "eth_estimateGas"]) {
      const tipAboveCap = await rpc(url, method, [
        { from: sender.address, to, maxFeePerGas: "0x10", maxPriorityFeePerGas: "0x20" },
      ]);
      expect(tipAboveCap.error).toEqual({
        code: -32000,
        message: `max priority fee per gas higher than max fee per gas: address ${sender.address.toLowerCase()}, maxPriorityFeePerGas: 32, maxFeePerGas: 16`,
      });
      const belowBaseFee = await rpc(url, method, [{ from: sender.address, to, maxFeePerGas: "0x1" }]);
      expect(belowBaseFee.error).toEqual({
        code: -32000,
        message: `max fee per gas less than block base fee: address ${sender.address.toLowerCase()}, maxFeePerGas: 1, baseFee: ${nextBaseFee}`,
      });
    }
    expect((await rpc(url, "eth_call", [{ from: sender.address, to, gas: "0x100" }])).error).toEqual({
      code: -32000,
      message: "intrinsic gas too low: have 256, want 21000",
    });
    // Gas beyond what any block holds is capped, as geth caps a call's gas.
    expect(
      await rpc(url, "eth_call", [{ from: sender.address, to, gas: `0x1${"0".repeat(20)}` }]),
    ).toMatchObject({
      result: "0x",
    });
    const belowBaseFeeInViem = await client
      .estimateGas({ account: sender.address, to, maxFeePerGas: 1n })
      .catch((error: unknown) => error);
    expect(
      belowBaseFeeInViem instanceof BaseError &&
        belowBaseFeeInViem.walk((e) => e instanceof FeeCapTooLowError),
    ).toBeInstanceOf(FeeCapTooLowError);

    // A sender whose balance pays for less gas than a transfer needs: geth's "gas required exceeds
    // allowance (0)", which viem reads as the call failing, whatever it is sent with.
    const unfunded = newAccount();
    await fund(url, unfunded.address, 1_000n);
    expect(
      (
        await rpc(url, "eth_estimateGas", [
          { from: unfunded.address, to, maxFeePerGas: toHex(parseGwei("30")) },
        ])
      ).error,
    ).toEqual({ code: -32000, message: "gas required exceeds allowance (0)" });
    const sent = await walletClientFor(url, unfunded)
      .sendTransaction({ to, value: 1n })
      .catch((error: unknown) => error);
    expect(sent).toBeInstanceOf(BaseError);
    expect((sent as BaseError).walk((e) => e instanceof ExecutionRevertedError)).toBeInstanceOf(
      ExecutionRevertedError,
    );
  });

  it("runs eth_call and eth_estimateGas at the base fee dev_setNextBlockBaseFeePerGas set, as the block that mines them", async () => {
    // Mutation: calls priced at the parent's EIP-1559 rule succeed with a fee cap that the next
    // block, at the base fee set, refuses when the same transaction is sent.
    const client = publicClientFor(url);
    const sender = newAccount();
    await fund(url, sender.address, usdc(10n));
    const wallet = walletClientFor(url, sender);
    const to = newAccount().address;
    const fees = { maxFeePerGas: parseGwei("50"), maxPriorityFeePerGas: parseGwei("1") };
    const raised = parseGwei("100");
    await setNextBaseFee(url, raised);
    const expected = `max fee per gas less than block base fee: address ${sender.address.toLowerCase()}, maxFeePerGas: ${fees.maxFeePerGas}, baseFee: ${raised}`;
    for (const method of ["eth_call", "eth_estimateGas"]) {
      const answer = await rpc(url, method, [
        { from: sender.address, to, value: "0x1", maxFeePerGas: toHex(fees.maxFeePerGas) },
      ]);
      expect(answer.error).toEqual({ code: -32000, message: expected });
    }
    const signed = await wallet.signTransaction({ to, value: 1n, nonce: 0, gas: 21_000n, ...fees });
    expect((await rpc(url, "eth_sendRawTransaction", [signed])).error).toEqual({
      code: -32000,
      message: expected,
    });
    // At a fee cap above it, the call and the transaction both go through, in a block at that base fee.
    const paying = { maxFeePerGas: parseGwei("150"), maxPriorityFeePerGas: parseGwei("1") };
    expect(await client.estimateGas({ account: sender.address, to, value: 1n, ...paying })).toBe(21_000n);
    const hash = await client.sendRawTransaction({
      serializedTransaction: await wallet.signTransaction({
        to,
        value: 1n,
        nonce: 0,
        gas: 21_000n,
        ...paying,
      }),
    });
    const block = await client.getBlock({
      blockNumber: (await client.getTransactionReceipt({ hash })).blockNumber,
    });
    expect(block.baseFeePerGas).toBe(raised);
  });

  it("mines a transaction sent ahead of its nonce once the gap is filled", async () => {
    const client = publicClientFor(url);
    const sender = newAccount();
    await fund(url, sender.address, usdc(1n));
    const wallet = walletClientFor(url, sender);
    const base = await wallet.prepareTransactionRequest({ to: newAccount().address, value: 1n });
    const first = await wallet.signTransaction(base);
    const second = await wallet.signTransaction({ ...base, nonce: base.nonce + 1 });

    const secondHash = await client.sendRawTransaction({ serializedTransaction: second });
    const pending = await client.getTransaction({ hash: secondHash });
    expect(pending.blockNumber).toBeNull();
    expect(await client.getTransactionReceipt({ hash: secondHash }).catch(() => null)).toBeNull();

    await client.sendRawTransaction({ serializedTransaction: first });
    const receipt = await client.waitForTransactionReceipt({ hash: secondHash });
    expect(receipt.status).toBe("success");
    expect(await client.getTransactionCount({ address: sender.address })).toBe(base.nonce + 2);
  });

  it("refuses a transaction ahead of its nonce that the sender's balance cannot pay, as geth's pool does", async () => {
    // geth checks balance ≥ gas × fee cap + value for every transaction it takes, queued or not
    // (core/txpool/validation.go); a queued one it cannot pay never gets a hash.
    const client = publicClientFor(url);
    const sender = newAccount();
    const balance = 21_000n * parseGwei("10");
    await fund(url, sender.address, balance);
    const wallet = walletClientFor(url, sender);
    const to = newAccount().address;
    const fees = { maxFeePerGas: parseGwei("10"), maxPriorityFeePerGas: parseGwei("1") } as const;
    const ahead = { to, nonce: 1, gas: 21_000n, ...fees } as const;

    const unaffordable = await wallet.signTransaction({ ...ahead, value: 1n });
    const answer = await rpc(url, "eth_sendRawTransaction", [unaffordable]);
    expect(answer.error).toEqual({
      code: -32000,
      message: `insufficient funds for gas * price + value: balance ${balance}, tx cost ${balance + 1n}, overshot 1`,
    });
    // viem's wallet classifies the refusal as the insufficient-funds error it knows.
    const refused = await wallet.sendTransaction({ ...ahead, value: 2n }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(BaseError);
    expect((refused as BaseError).walk((e) => e instanceof InsufficientFundsError)).toBeInstanceOf(
      InsufficientFundsError,
    );
    expect(await client.getTransaction({ hash: keccak256(unaffordable) }).catch(() => null)).toBeNull();

    // One it can pay waits; a replacement that bumps its cost past the balance is refused too.
    const affordable = await client.sendRawTransaction({
      serializedTransaction: await wallet.signTransaction({ ...ahead, value: 0n }),
    });
    const bumped = await rpc(url, "eth_sendRawTransaction", [
      await wallet.signTransaction({
        ...ahead,
        value: 0n,
        maxFeePerGas: parseGwei("20"),
        maxPriorityFeePerGas: parseGwei("2"),
      }),
    ]);
    expect((bumped.error as { message: string }).message).toMatch(
      /^insufficient funds for gas \* price \+ value/,
    );
    expect((await client.getTransaction({ hash: affordable })).blockNumber).toBeNull();
  });

  it("keeps a base fee set while a block is being built for the block after it", async () => {
    // Mutation: the block being built clears the setting when it is stored, though it was made
    // before it and never used it; the next block follows the EIP-1559 rule instead.
    const client = publicClientFor(url);
    const senders = Array.from({ length: 300 }, () => newAccount());
    await rpcBatch(
      url,
      senders.map((sender) => ["dev_setBalance", [sender.address, toHex(usdc(1n))]]),
    );
    const to = newAccount().address;
    const fees = { maxFeePerGas: parseGwei("500"), maxPriorityFeePerGas: parseGwei("1") };
    const raws = await Promise.all(
      senders.map((sender) =>
        sender.signTransaction({
          chainId: 77,
          type: "eip1559",
          to,
          value: 1n,
          nonce: 0,
          gas: 21_000n,
          ...fees,
        }),
      ),
    );
    expect(await rpc(url, "dev_setAutomine", [false])).toMatchObject({ result: true });
    try {
      await rpcBatch(
        url,
        raws.map((raw) => ["eth_sendRawTransaction", [raw]]),
      );
      const before = await client.getBlockNumber({ cacheTime: 0 });
      const mining = rpc(url, "dev_mine", []);
      // The block of 300 is being built (its builder made, with the base fee of then) when the
      // setting arrives.
      await new Promise((resolve) => setTimeout(resolve, 30));
      expect(await client.getBlockNumber({ cacheTime: 0 })).toBe(before);
      await setNextBaseFee(url, parseGwei("200"));
      await mining;
    } finally {
      await rpc(url, "dev_setAutomine", [true]);
    }
    const built = await client.getBlock();
    expect(built.transactions).toHaveLength(300);
    expect(built.baseFeePerGas).not.toBe(parseGwei("200"));
    const next = newAccount();
    await fund(url, next.address, 1n);
    expect((await client.getBlock()).baseFeePerGas).toBe(parseGwei("200"));
  });

  it("replaces a transaction waiting for its nonce by geth's price bump rule", async () => {
    // Mutation: the bump computed without geth's rounding down refuses a replacement at geth's
    // exact threshold, and without its "strictly higher" check takes one that keeps a zero tip.
    const client = publicClientFor(url);
    const sender = newAccount();
    await fund(url, sender.address, usdc(1n));
    const wallet = walletClientFor(url, sender);
    const to = newAccount().address;
    const ahead = { to, value: 1n, nonce: 1, gas: 21_000n } as const;
    const send = async (fees: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }) =>
      rpc(url, "eth_sendRawTransaction", [await wallet.signTransaction({ ...ahead, ...fees })]);

    // 110 % of 1,000,000,000,015 and of 1,000,000,000,005 wei, rounded down as geth does (fees
    // well above any base fee an earlier test left).
    expect(
      await send({ maxFeePerGas: 1_000_000_000_015n, maxPriorityFeePerGas: 1_000_000_000_005n }),
    ).toHaveProperty("result");
    const replacement = await send({
      maxFeePerGas: 1_100_000_000_016n,
      maxPriorityFeePerGas: 1_100_000_000_005n,
    });
    expect(replacement).toHaveProperty("result");
    // Same tip (zero), fee cap doubled: geth wants both raised.
    const zeroTipSender = newAccount();
    await fund(url, zeroTipSender.address, usdc(1n));
    const zeroTipWallet = walletClientFor(url, zeroTipSender);
    const zeroTip = async (maxFeePerGas: bigint) =>
      rpc(url, "eth_sendRawTransaction", [
        await zeroTipWallet.signTransaction({ ...ahead, maxFeePerGas, maxPriorityFeePerGas: 0n }),
      ]);
    expect(await zeroTip(parseGwei("10"))).toHaveProperty("result");
    expect((await zeroTip(parseGwei("20"))).error).toEqual({
      code: -32000,
      message: "replacement transaction underpriced",
    });

    // The gap filled, the replacement is the one mined.
    await wallet.sendTransaction({ to, value: 1n, nonce: 0 });
    const mined = await client.getTransactionReceipt({ hash: replacement.result as Hex });
    expect(mined.status).toBe("success");
  });

  it("with dev_setAutomine(false), answers a transaction's hash at once and mines it only at dev_mine", async () => {
    // Mutation: sendRawTransaction ignoring the automine switch mines the transaction at once
    // (its receipt is there before dev_mine).
    const client = publicClientFor(url);
    const sender = newAccount();
    await fund(url, sender.address, usdc(1n));
    const wallet = walletClientFor(url, sender);
    const request = await wallet.prepareTransactionRequest({ to: newAccount().address, value: 1n });
    const signed = await wallet.signTransaction(request);
    expect(await rpc(url, "dev_setAutomine", [false])).toMatchObject({ result: true });
    try {
      const height = await client.getBlockNumber();
      const hash = await client.sendRawTransaction({ serializedTransaction: signed });
      expect((await client.getTransaction({ hash })).blockNumber).toBeNull();
      expect(await client.getTransactionReceipt({ hash }).catch(() => null)).toBeNull();
      // A block sealed meanwhile (dev_setBalance's) leaves it waiting.
      await fund(url, newAccount().address, 1n);
      expect(await client.getTransactionReceipt({ hash }).catch(() => null)).toBeNull();
      expect(await rpc(url, "dev_mine", [])).toMatchObject({ result: true });
      const receipt = await client.getTransactionReceipt({ hash });
      expect(receipt.status).toBe("success");
      expect(receipt.blockNumber).toBe(height + 2n);
    } finally {
      await rpc(url, "dev_setAutomine", [true]);
    }
    // Automining again: the next transaction's receipt is there when its send returns.
    const next = await wallet.signTransaction({ ...request, nonce: request.nonce + 1 });
    const nextHash = await client.sendRawTransaction({ serializedTransaction: next });
    expect((await client.getTransactionReceipt({ hash: nextHash })).status).toBe("success");
  });

  it("filters logs by address, topics, block range and block hash", async () => {
    const client = publicClientFor(url);
    const relayer = newAccount();
    const payer = newAccount();
    const [payeeA, payeeB] = [newAccount().address, newAccount().address];
    await fund(url, relayer.address, usdc(1n));
    await fund(url, payer.address, usdc(1n));
    const wallet = walletClientFor(url, relayer);
    const receipts = [];
    for (const payee of [payeeA, payeeB, payeeA]) {
      const hash = await wallet.sendTransaction({
        to: NATIVE_TRANSFER_AUTH_ADDRESS,
        data: await transferCalldata(payer, payee, 1_000n),
      });
      receipts.push(await client.waitForTransactionReceipt({ hash }));
    }
    const first = receipts[0]!.blockNumber;
    const last = receipts[2]!.blockNumber;

    const all = await client.getLogs({
      address: NATIVE_TRANSFER_AUTH_ADDRESS,
      fromBlock: first,
      toBlock: last,
    });
    expect(all).toHaveLength(6);
    expect(
      await client.getLogs({ address: newAccount().address, fromBlock: first, toBlock: last }),
    ).toHaveLength(0);

    const toA = await client.getLogs({
      address: NATIVE_TRANSFER_AUTH_ADDRESS,
      event: getAbiItem({ abi: NATIVE_TRANSFER_AUTH_ABI, name: "Transfer" }),
      args: { to: payeeA },
      fromBlock: first,
      toBlock: last,
    });
    expect(toA.map((log) => log.transactionHash)).toEqual([
      receipts[0]!.transactionHash,
      receipts[2]!.transactionHash,
    ]);
    expect(toA[0]?.args).toEqual({ from: payer.address, to: payeeA, value: 1_000n });

    const transfersFromSecond = await rpc(url, "eth_getLogs", [
      { fromBlock: toHex(receipts[1]!.blockNumber), toBlock: "latest", topics: [TRANSFER_TOPIC] },
    ]);
    expect((transfersFromSecond.result as unknown[]).length).toBe(2);

    const anyOfTwo = await rpc(url, "eth_getLogs", [
      {
        fromBlock: toHex(first),
        topics: [
          TRANSFER_TOPIC,
          null,
          [payeeA, payeeB].map((a) => `0x${a.slice(2).toLowerCase().padStart(64, "0")}`),
        ],
      },
    ]);
    expect((anyOfTwo.result as unknown[]).length).toBe(3);

    const byHash = await rpc(url, "eth_getLogs", [{ blockHash: receipts[1]!.blockHash }]);
    expect((byHash.result as Array<{ transactionHash: string }>).map((log) => log.transactionHash)).toEqual([
      receipts[1]!.transactionHash,
      receipts[1]!.transactionHash,
    ]);
    expect(
      (await rpc(url, "eth_getLogs", [{ fromBlock: toHex(last), toBlock: toHex(first) }])).error,
    ).toMatchObject({
      code: -32602,
    });
  });

  /** A relayer's transaction of one USDC transferWithAuthorization (two logs), sent; its hash. */
  const relayTransfer = async (): Promise<Hex> => {
    const relayer = newAccount();
    const payer = newAccount();
    await fund(url, relayer.address, usdc(1n));
    await fund(url, payer.address, usdc(1n));
    return walletClientFor(url, relayer).sendTransaction({
      to: NATIVE_TRANSFER_AUTH_ADDRESS,
      data: await transferCalldata(payer, newAccount().address, 1_000n),
    });
  };

  it("refuses a log range that reaches past the head, as geth does, rather than answering the part mined so far", async () => {
    // geth (the execution-apis conformance tests eth_getLogs/filter-error-*): a toBlock above the
    // head is -32602 "block range extends beyond current head block"; a fromBlock above the head
    // with toBlock "latest" is a reversed range.
    const client = publicClientFor(url);
    const { blockNumber: mined } = await client.waitForTransactionReceipt({ hash: await relayTransfer() });
    const head = await client.getBlockNumber();
    expect(head).toBe(mined);
    const beyondHead = { code: -32602, message: "block range extends beyond current head block" };
    const reversed = { code: -32602, message: "invalid block range params" };
    const logs = (filter: Record<string, unknown>) => rpc(url, "eth_getLogs", [filter]);

    // Within the head: the settlement's two logs.
    expect((await logs({ fromBlock: toHex(mined), toBlock: toHex(head) })).result).toHaveLength(2);
    // Reaching past it: refused, not the two logs mined so far (a poller would skip what comes next).
    expect((await logs({ fromBlock: toHex(mined), toBlock: toHex(head + 5n) })).error).toEqual(beyondHead);
    expect((await logs({ fromBlock: toHex(head + 1n), toBlock: toHex(head + 3n) })).error).toEqual(
      beyondHead,
    );
    expect((await logs({ fromBlock: toHex(head + 1n), toBlock: "latest" })).error).toEqual(reversed);
    expect((await logs({ fromBlock: toHex(head + 4n), toBlock: toHex(head + 2n) })).error).toEqual(reversed);
    await expect(client.getLogs({ fromBlock: mined, toBlock: head + 1n })).rejects.toThrow(
      /block range extends beyond current head block/,
    );
  });

  it("matches a topic filter longer than a log's topics to nothing, as geth does, so an ERC-721 Transfer filter leaves USDC's out", async () => {
    // geth's filterLogs: a filter naming more topic positions than a log has skips the log, even
    // when the extra positions are wildcards. ERC-20 and ERC-721 share the Transfer signature; the
    // fourth (tokenId) topic is what tells them apart.
    const client = publicClientFor(url);
    const { blockHash } = await client.waitForTransactionReceipt({ hash: await relayTransfer() });
    const logs = async (topics: unknown[]) =>
      (await rpc(url, "eth_getLogs", [{ blockHash, topics }])).result as Array<{ topics: Hex[] }>;

    const erc20 = await logs([TRANSFER_TOPIC, null, null]);
    expect(erc20.map((log) => log.topics[0])).toEqual([TRANSFER_TOPIC]);
    expect(await logs([TRANSFER_TOPIC, null, null, null])).toEqual([]);
    expect(await logs([null, null, null, null])).toEqual([]);
    expect(await logs([[], [], []])).toHaveLength(2);
  });

  it("takes an empty address list in a log filter as any address, as geth does", async () => {
    // geth's filterLogs tests the address only when the list has entries: [] is no restriction.
    const client = publicClientFor(url);
    const { blockHash } = await client.waitForTransactionReceipt({ hash: await relayTransfer() });
    const logs = async (address: unknown) =>
      (await rpc(url, "eth_getLogs", [{ blockHash, address }])).result as unknown[];

    expect(await logs(undefined)).toHaveLength(2);
    expect(await logs([])).toHaveLength(2);
    expect(await logs([NATIVE_TRANSFER_AUTH_ADDRESS])).toHaveLength(2);
    expect(await logs([newAccount().address])).toHaveLength(0);
  });

  it("reads balances at past blocks", async () => {
    const client = publicClientFor(url);
    const account = newAccount();
    await fund(url, account.address, 5n);
    const fundedAt = await client.getBlockNumber();
    await fund(url, account.address, 7n);
    expect(await client.getBalance({ address: account.address, blockNumber: fundedAt - 1n })).toBe(0n);
    expect(await client.getBalance({ address: account.address, blockNumber: fundedAt })).toBe(5n);
    expect(await client.getBalance({ address: account.address })).toBe(7n);
  });

  it("keeps concurrent transactions from many senders consistent", async () => {
    const client = publicClientFor(url);
    const senders = Array.from({ length: 8 }, () => newAccount());
    const sink = newAccount().address;
    for (const sender of senders) await fund(url, sender.address, usdc(1n));
    const start = await client.getBlockNumber();
    const hashes = await Promise.all(
      senders.map((sender) => walletClientFor(url, sender).sendTransaction({ to: sink, value: 1_000n })),
    );
    const receipts = await Promise.all(hashes.map((hash) => client.waitForTransactionReceipt({ hash })));
    expect(receipts.every((receipt) => receipt.status === "success")).toBe(true);
    // Transactions that arrive while a block is being built share the next one (blocks.int.test.ts).
    const blocks = new Set(receipts.map((receipt) => receipt.blockNumber));
    expect(await client.getBlockNumber({ cacheTime: 0 })).toBe(start + BigInt(blocks.size));
    const positions = receipts.map((receipt) => `${receipt.blockNumber}/${receipt.transactionIndex}`);
    expect(new Set(positions).size).toBe(senders.length);
    expect(await client.getBalance({ address: sink })).toBe(8_000n);
  });
});
