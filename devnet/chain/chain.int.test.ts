import { createAddressFromString, hexToBytes } from "@ethereumjs/util";
import { type Hex, keccak256, parseGwei } from "viem";
import type { PrivateKeyAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CHAIN_ID, NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../../shared/constants.ts";
import { DEFAULT_OPERATOR_POOL_BALANCE_WEI, DEV_OPERATOR_POOL_ADDRESS } from "../constants.ts";
import { silentLogger } from "../logger.ts";
import {
  newAccount,
  signTransferAuthorization,
  transferAuthorization,
  transferWithAuthorizationCalldata,
  usdc,
} from "../testing.ts";
import { Chain } from "./chain.ts";
// The function the chain recovers with on the spot (libsecp256k1, else @ethereumjs/util's).
import { ecrecover, SignatureRecovery } from "./signature-recovery.ts";

const FEES = { maxFeePerGas: parseGwei("30"), maxPriorityFeePerGas: parseGwei("1") };

function address(account: PrivateKeyAccount): ReturnType<typeof createAddressFromString> {
  return createAddressFromString(account.address.toLowerCase());
}

describe("devnet chain: group commit and signature recovery on a worker", () => {
  let recovery: SignatureRecovery;
  let chain: Chain;

  beforeAll(async () => {
    recovery = new SignatureRecovery(1);
    chain = await Chain.create({
      operatorPool: createAddressFromString(DEV_OPERATOR_POOL_ADDRESS.toLowerCase()),
      operatorPoolBalanceWei: DEFAULT_OPERATOR_POOL_BALANCE_WEI,
      logger: silentLogger,
      recovery,
    });
  });
  afterAll(async () => {
    await recovery.close();
  });

  it("serves the keys a worker recovered to ethereumjs (sender) and the precompile (authorization)", async () => {
    const [payer, relayer] = [newAccount(), newAccount()];
    await chain.setBalance(address(payer), usdc(10n));
    await chain.setBalance(address(relayer), usdc(10n));
    const auth = transferAuthorization(payer.address, newAccount().address, 5_000n);
    const raw = await relayer.signTransaction({
      chainId: CHAIN_ID,
      type: "eip1559",
      to: NATIVE_TRANSFER_AUTH_ADDRESS,
      data: transferWithAuthorizationCalldata(auth, await signTransferAuthorization(payer, auth)),
      nonce: 0,
      gas: 100_000n,
      ...FEES,
    });

    const served = recovery.served;
    const sent = await chain.sendRawTransaction(hexToBytes(raw));
    expect(sent).toEqual({ ok: true, value: keccak256(raw) });
    const receipt = chain.receipt(keccak256(raw));
    expect(receipt?.status).toBe("0x1");
    expect(receipt?.logs).toHaveLength(2);
    const payee = await chain.account(createAddressFromString(auth.to.toLowerCase()), "latest");
    expect(payee.ok && payee.value.balance).toBe(5_000n * WEI_PER_UNIT);
    // Both keys were recovered ahead and both were asked for by the exact same inputs.
    expect(recovery.served - served).toBe(2);
    expect(recovery.prefetched).toBe(0);
  });

  it("keeps nothing for a signature that recovers nothing; on the spot it fails with ecrecover's own error", async () => {
    const input = {
      hash: hexToBytes(keccak256("0x01")),
      v: 27n,
      r: new Uint8Array(32),
      s: hexToBytes(`0x${"22".repeat(32)}`),
      chainId: undefined,
    };
    await recovery.prefetch([input]);
    expect(recovery.prefetched).toBe(0);
    const attempt = (recover: typeof ecrecover): unknown => {
      try {
        return recover(input.hash, input.v, input.r, input.s);
      } catch (error) {
        return error;
      }
    };
    expect(attempt(recovery.ecrecover)).toEqual(attempt(ecrecover));
    expect(attempt(ecrecover)).toBeInstanceOf(Error);
  });

  it("serves a prefetched key only for the exact inputs it was recovered from", async () => {
    const signer = newAccount();
    const signature = await signer.sign({ hash: keccak256("0x02") });
    const input = {
      hash: hexToBytes(keccak256("0x02")),
      v: BigInt(Number.parseInt(signature.slice(130, 132), 16)),
      r: hexToBytes(`0x${signature.slice(2, 66)}`),
      s: hexToBytes(`0x${signature.slice(66, 130)}`),
      chainId: undefined,
    };
    await recovery.prefetch([input]);
    expect(recovery.prefetched).toBe(1);
    // The same signature with another s: not the key kept for the first.
    const other = { ...input, s: hexToBytes(`0x${"33".repeat(32)}`) };
    const attempt = (recover: typeof ecrecover, i: typeof input): unknown => {
      try {
        return recover(i.hash, i.v, i.r, i.s);
      } catch (error) {
        return error;
      }
    };
    expect(attempt(recovery.ecrecover, other)).toEqual(attempt(ecrecover, other));
    expect(recovery.prefetched).toBe(1);
    expect(attempt(recovery.ecrecover, input)).toEqual(ecrecover(input.hash, input.v, input.r, input.s));
    expect(recovery.prefetched).toBe(0);
  });

  it("puts transactions received in the same turn of the event loop into one block", async () => {
    const senders = [newAccount(), newAccount(), newAccount()];
    for (const sender of senders) await chain.setBalance(address(sender), usdc(1n));
    const raws = await Promise.all(
      senders.map((sender) =>
        sender.signTransaction({
          chainId: CHAIN_ID,
          type: "eip1559",
          to: newAccount().address,
          value: 1n,
          nonce: 0,
          gas: 21_000n,
          ...FEES,
        }),
      ),
    );
    const height = chain.height;

    // Immediates queued together run in one pass of the loop, one after another, like requests
    // read in one poll phase; promise jobs run between them, so the run queued by the first one
    // would start before the others arrive but for its own yield (an immediate queued after them).
    const sent = await new Promise<unknown[]>((resolve) => {
      const answers: Array<Promise<unknown>> = [];
      raws.forEach((raw, i) => {
        setImmediate(() => {
          answers.push(chain.sendRawTransaction(hexToBytes(raw)));
          if (i === raws.length - 1) resolve(Promise.all(answers));
        });
      });
    });
    expect(sent).toEqual(raws.map((raw) => ({ ok: true, value: keccak256(raw) })));
    expect(chain.height).toBe(height + 1);
    expect(chain.head.transactions.map((tx) => tx.hash)).toEqual(raws.map((raw) => keccak256(raw)));
  });

  it("answers a transaction sent ahead of its nonce only once the group that fills the gap has mined it", async () => {
    const sender = newAccount();
    await chain.setBalance(address(sender), usdc(1n));
    const sink = newAccount().address;
    const [first, second] = await Promise.all(
      [0, 1].map((nonce) =>
        sender.signTransaction({
          chainId: CHAIN_ID,
          type: "eip1559",
          to: sink,
          value: 1n,
          nonce,
          gas: 21_000n,
          ...FEES,
        }),
      ),
    );
    const height = chain.height;

    // Ahead of its nonce when the block reaches it, the second waits in the future queue; the
    // first then fills the gap in the same block, and only then is the second's caller answered.
    const secondSent = chain.sendRawTransaction(hexToBytes(second as Hex));
    const firstSent = chain.sendRawTransaction(hexToBytes(first as Hex));
    expect(await secondSent).toEqual({ ok: true, value: keccak256(second as Hex) });
    expect(chain.receipt(keccak256(second as Hex))?.transactionIndex).toBe("0x1");
    expect(await firstSent).toEqual({ ok: true, value: keccak256(first as Hex) });
    expect(chain.height).toBe(height + 1);
    const balance = await chain.account(createAddressFromString(sink.toLowerCase()), "latest");
    expect(balance.ok && balance.value.balance).toBe(2n);
  });
});
