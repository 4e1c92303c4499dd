/**
 * The conformance cases of an implementation with the real enclave behind it (conformance.ts):
 * signing under the sealed policy, concurrency, and the faults a caller must get back as
 * `retryable` failures. The faults are the enclave process's own: SIGSTOP makes a request go
 * unanswered, SIGKILL drops the connection under it and leaves the enclave down.
 */
import { randomUUID } from "node:crypto";
import { parseTransaction, recoverTransactionAddress } from "viem";
import { beforeAll, expect, it } from "vitest";
import { authorityPublicKey } from "../../shared/capability.ts";
import type { Hex } from "../../shared/hex.ts";
import { createCapabilityMinter } from "./capability-minter.ts";
import {
  answered,
  CONFORMANCE_POLICY,
  retryable,
  type SignerOp,
  transferParams,
} from "./conformance-calls.ts";
import { CLIENT_FAILURE } from "./failure-class.ts";
import type {
  CapabilityProvider,
  KeyPublicInfo,
  SignerClient,
  SignerResult,
  SignTransactionParams,
} from "./types.ts";

/**
 * The enclave behind the live ops, as the suite uses it (testing/enclave-process.ts gives one).
 * `kill` SIGKILLs it (a stopped process too); `start` runs it again on its data.
 */
export type ConformanceEnclave = {
  envId: string;
  adminSecret: Uint8Array;
  policySecret: Uint8Array;
  pid(): number | undefined;
  kill(): Promise<void>;
  start(): Promise<void>;
  dispose(): Promise<void>;
};

export type ConformanceClientOptions = { requestTimeoutMs: number };

/** The suite's handle on the implementation under test. */
export type ConformanceSubject<E extends ConformanceEnclave> = {
  /** A fresh client; the suite closes it after the case. */
  open: (options?: ConformanceClientOptions) => SignerClient;
  /** The running enclave (from the suite's beforeAll on). */
  enclave: () => E;
};

/** The ops these cases call: an implementation running them must not answer them dormant. */
export const ENCLAVE_CASE_OPS: readonly SignerOp[] = [
  "generateKeys",
  "configurePolicy",
  "signTransfer",
  "getPolicy",
  "getSealedIdentity",
  "capabilityCounter",
];

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The nonce and value of a signed transaction, as the chain would read them. */
function signedFields(result: SignerResult<unknown>): { nonce: number; value: bigint } | undefined {
  if (!result.ok) return undefined;
  const parsed = parseTransaction((result.value as { rawTransaction: Hex }).rawTransaction);
  return { nonce: parsed.nonce!, value: parsed.value! };
}

/** Defines the cases that need the enclave; called inside the suite's describe. */
export function describeEnclaveConformance<E extends ConformanceEnclave>(
  subject: ConformanceSubject<E>,
): void {
  const { open } = subject;
  // The enclave's own state: agent keys and a sealed policy, made through the implementation.
  let keys: KeyPublicInfo[] = [];
  let nextNonce = 1n;
  const held = (overrides: Partial<SignTransactionParams> = {}): SignTransactionParams =>
    transferParams(nextNonce++, { keyRef: keys[0]!.keyRef, from: keys[0]!.address, ...overrides });
  const minter = (client: SignerClient, authority: Uint8Array): CapabilityProvider =>
    createCapabilityMinter({ authority, envId: subject.enclave().envId, client });
  /** Runs `body` with the enclave process stopped (SIGSTOP): it reads nothing, answers nothing. */
  const paused = async <T>(body: () => Promise<T>): Promise<T> => {
    process.kill(subject.enclave().pid()!, "SIGSTOP");
    try {
      return await body();
    } finally {
      const pid = subject.enclave().pid();
      if (pid !== undefined) process.kill(pid, "SIGCONT");
    }
  };

  beforeAll(async () => {
    const client = open({ requestTimeoutMs: 30_000 });
    const made = await client.generateKeys(
      { namespace: "agent-transfer", count: 2, batchId: `conformance-${randomUUID()}` },
      minter(client, subject.enclave().adminSecret),
    );
    if (!made.ok) throw new Error(`generate_keys: ${made.error.code}`);
    keys = made.value.keys;
    const sealed = await client.configurePolicy(
      CONFORMANCE_POLICY,
      minter(client, subject.enclave().policySecret),
    );
    if (!sealed.ok) throw new Error(`configure_policy: ${sealed.error.code}`);
    await client.close();
  });

  it("signs within the sealed policy, and a refusal under it names the bound in `detail`", async () => {
    const client = open();
    const signed = await answered(client.signTransfer(held({ valueUnits: 250_000n })));
    expect(signed.ok).toBe(true);
    if (!signed.ok) return;
    const raw = (signed.value as { rawTransaction: `0x02${string}` }).rawTransaction;
    expect(await recoverTransactionAddress({ serializedTransaction: raw })).toBe(keys[0]!.address);
    const over = held({ valueUnits: CONFORMANCE_POLICY.perTxLimitUnits + 1n });
    expect(await answered(client.signTransfer(over))).toEqual({
      ok: false,
      error: {
        class: "terminal_agent",
        code: "cap_exceeded",
        reason: expect.any(String),
        detail: "per_transaction",
      },
    });
  });

  it("answers concurrent calls each with its own reply", async () => {
    const client = open();
    const requests = Array.from({ length: 24 }, (_, index) => held({ valueUnits: BigInt(1_000 + index) }));
    const results = await Promise.all(requests.map((request) => answered(client.signTransfer(request))));
    expect(results.map(signedFields)).toEqual(
      requests.map((request) => ({ nonce: Number(request.nonce), value: request.valueUnits * 10n ** 12n })),
    );
  });

  it("runs concurrent privileged calls one at a time, so a minter's counters stay contiguous", async () => {
    const client = open({ requestTimeoutMs: 30_000 });
    const admin = subject.enclave().adminSecret;
    const counter = () =>
      client.capabilityCounter({ authority: authorityPublicKey(admin), scope: "admin", op: "generate_keys" });
    const before = await counter();
    if (!before.ok) expect.fail(`capability_counter: ${before.error.code}`);
    const authorize = minter(client, admin);
    const made = await Promise.all(
      [1, 2, 3].map(() =>
        answered(
          client.generateKeys(
            { namespace: "faucet", count: 1, batchId: `conformance-${randomUUID()}` },
            authorize,
          ),
        ),
      ),
    );
    expect(made.map((result) => result.ok)).toEqual([true, true, true]);
    expect(await counter()).toEqual({ ok: true, value: { nextCounter: before.value.nextCounter + 3 } });
  });

  it("runs privileged calls of different ops side by side: one waiting on its capability holds up no other", async () => {
    const client = open({ requestTimeoutMs: 30_000 });
    const admin = minter(client, subject.enclave().adminSecret);
    let release = (): void => {};
    const capabilityHeld = new Promise<void>((resolve) => {
      release = resolve;
    });
    const slowAuthorize: CapabilityProvider = async (request) => {
      await capabilityHeld;
      return admin(request);
    };
    try {
      const generating = answered(
        client.generateKeys(
          { namespace: "faucet", count: 1, batchId: `conformance-${randomUUID()}` },
          slowAuthorize,
        ),
      );
      // configure_policy counts apart from generate_keys: it must not queue behind the held call.
      const sealing = answered(
        client.configurePolicy(CONFORMANCE_POLICY, minter(client, subject.enclave().policySecret)),
      );
      let waited: NodeJS.Timeout | undefined;
      const first = await Promise.race([
        sealing.then((result) => ({ sealed: result })),
        new Promise<"still waiting">((resolve) => {
          waited = setTimeout(() => resolve("still waiting"), 5_000);
        }),
      ]);
      clearTimeout(waited);
      expect(first).toEqual({ sealed: expect.objectContaining({ ok: true }) });
      release();
      expect(await generating).toMatchObject({ ok: true });
    } finally {
      release();
    }
  });

  it("a request the enclave does not answer in time is a retryable signer_timeout; the same client answers once the enclave does", async () => {
    const client = open({ requestTimeoutMs: 300 });
    await answered(client.getPolicy());
    const late = await paused(() => answered(client.signTransfer(held())));
    expect(late).toMatchObject(retryable(CLIENT_FAILURE.timeout));
    // The late reply to the timed-out request is not the answer to the next one.
    const next = held();
    expect(signedFields(await answered(client.signTransfer(next)))).toEqual({
      nonce: Number(next.nonce),
      value: next.valueUnits * 10n ** 12n,
    });
  });

  it("getPolicy({ timeoutMs }) bounds the wait below the client's own timeout", async () => {
    const client = open({ requestTimeoutMs: 10_000 });
    await answered(client.getPolicy());
    const started = performance.now();
    const result = await paused(() => answered(client.getPolicy({ timeoutMs: 200 })));
    expect(result).toMatchObject(retryable(CLIENT_FAILURE.timeout));
    expect(performance.now() - started).toBeLessThan(3_000);
  });

  it("close() with a request in flight answers it as a retryable signer_client_closed", async () => {
    const client = open();
    await answered(client.getPolicy());
    const result = await paused(async () => {
      const inFlight = answered(client.signTransfer(held()));
      await nextTurn();
      await client.close();
      return inFlight;
    });
    expect(result).toMatchObject(retryable(CLIENT_FAILURE.clientClosed));
  });

  it("a connection lost under a request and an enclave that is down are retryable; the same client serves once it is back", async () => {
    const client = open();
    await answered(client.getPolicy());
    const enclave = subject.enclave();
    process.kill(enclave.pid()!, "SIGSTOP");
    const inFlight = answered(client.signTransfer(held()));
    await nextTurn();
    await enclave.kill();
    try {
      expect(await inFlight).toMatchObject(retryable(CLIENT_FAILURE.connectionLost));
      expect(await answered(client.getPolicy())).toMatchObject(retryable(CLIENT_FAILURE.unreachable));
    } finally {
      await enclave.start();
    }
    expect(await answered(client.getPolicy())).toMatchObject({ ok: true, value: { envId: enclave.envId } });
  });
}
