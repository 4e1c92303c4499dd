/**
 * The contract every SignerClient keeps, whatever answers behind it (the socket client, the
 * socket client with dormant identity ops, the dormant stub, the metrics wrapper): what its
 * callers rely on, written once and run by each implementation from its own test file.
 *
 *  - every op answers a Result: an expected failure is a value, never an exception, carrying the
 *    `code` and the `class` failure-class.ts gives that code, and a refusal's sealed bound in
 *    `detail` (the identity sweep records the class; the money and x402 routes switch on class,
 *    code and detail; key-holding.ts reads `key_purpose_mismatch` as a key not held);
 *  - an op the dormant stub answers (docs/operations.md#switching-a-node-to-live-signing)
 *    answers `agent_signer_protocol_unavailable`, whatever it is asked and after close();
 *  - a timeout, a connection lost under a request, an enclave that is down and a closed client are
 *    `retryable` failures, and the same client serves again once the enclave does (the origin
 *    builds one client and keeps it);
 *  - ops survive being taken off the client (create-signer-client.ts spreads it, key-holding.ts
 *    keeps `publicIdentity` alone); concurrent calls each get their own answer; privileged calls
 *    of one op run one at a time, so a minter's counters stay contiguous, and calls of different
 *    ops do not wait on each other; close() is safe twice.
 *
 * The enclave cases (conformance-enclave.ts) run against the real enclave process the test file
 * starts, and their faults are real: SIGSTOP for a timeout, SIGKILL for a lost connection.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { MAX_FRAME_BYTES } from "../../shared/cbor-frame.ts";
import { err } from "../../shared/result.ts";
import {
  answered,
  callOp,
  DORMANT_ANSWER,
  liveAnswerOf,
  PRIVILEGED_SIGNER_OPS,
  retryable,
  SAMPLE_CALLS,
  SIGNER_OPS,
  type SignerOp,
} from "./conformance-calls.ts";
import {
  type ConformanceClientOptions,
  type ConformanceEnclave,
  type ConformanceSubject,
  describeEnclaveConformance,
  ENCLAVE_CASE_OPS,
} from "./conformance-enclave.ts";
import { CLIENT_FAILURE, signerFailure } from "./failure-class.ts";
import type { CapabilityProvider, SignerClient } from "./types.ts";

export type { SignerOp } from "./conformance-calls.ts";
export type { ConformanceClientOptions, ConformanceEnclave } from "./conformance-enclave.ts";

/** An implementation with no enclave at all: every op is the dormant stub's. */
export type DormantConformanceTarget = { client: () => SignerClient };

/** An implementation over the real enclave; the dormant stub answers `dormantOps` instead. */
export type EnclaveConformanceTarget<E extends ConformanceEnclave> = {
  startEnclave: () => Promise<E>;
  client: (enclave: E, options: ConformanceClientOptions) => SignerClient;
  dormantOps: readonly SignerOp[];
};

export type SignerConformanceTarget<E extends ConformanceEnclave> =
  | DormantConformanceTarget
  | EnclaveConformanceTarget<E>;

/** Defines the conformance cases of one implementation of SignerClient. */
export function describeSignerConformance<E extends ConformanceEnclave>(
  name: string,
  target: SignerConformanceTarget<E>,
): void {
  const dormant = new Set<SignerOp>("startEnclave" in target ? target.dormantOps : SIGNER_OPS);
  const needed = ENCLAVE_CASE_OPS.filter((op) => dormant.has(op));
  if ("startEnclave" in target && needed.length > 0) {
    throw new Error(`the enclave cases need ${needed.join(", ")} live`);
  }
  /** What `op` answers: the dormant stub's answer, or `live` where the call reaches the enclave. */
  const expectedOf = (op: SignerOp, live: object): object => (dormant.has(op) ? DORMANT_ANSWER : live);

  describe(`SignerClient conformance: ${name}`, () => {
    let enclave: E | undefined;
    const opened: SignerClient[] = [];
    const subject: ConformanceSubject<E> = {
      open: (options = { requestTimeoutMs: 5_000 }) => {
        const client = "startEnclave" in target ? target.client(enclave!, options) : target.client();
        opened.push(client);
        return client;
      },
      enclave: () => enclave!,
    };
    const { open } = subject;

    beforeAll(async () => {
      if ("startEnclave" in target) enclave = await target.startEnclave();
    });
    afterEach(async () => {
      await Promise.all(opened.splice(0).map((client) => client.close()));
    });
    afterAll(async () => {
      await enclave?.dispose();
    });

    it("has every op and close() as functions, and so does a copy spread from it", async () => {
      const client = open();
      const copy = { ...client };
      for (const op of [...SIGNER_OPS, "close" as const]) {
        expect(typeof client[op], op).toBe("function");
        expect(typeof copy[op], op).toBe("function");
      }
      for (const op of SIGNER_OPS) await answered(callOp(copy, op));
    });

    for (const op of SIGNER_OPS) {
      const call = [op, SAMPLE_CALLS[op].asks].filter(Boolean).join(" ");
      it(`${call}: answers a Result; a failure carries the class of its code`, async () => {
        const result = await answered(callOp(open(), op));
        expect(result).toMatchObject(expectedOf(op, liveAnswerOf(op)));
      });
    }

    it("a privileged op whose capability provider throws answers a failure, not a throw (terminal_config capability_unavailable where it would reach the enclave)", async () => {
      const client = open();
      const throwing: CapabilityProvider = async () => {
        throw new Error("the authority key file is unreadable");
      };
      const unavailable = {
        ok: false,
        error: { class: "terminal_config", code: CLIENT_FAILURE.capabilityUnavailable },
      };
      for (const op of PRIVILEGED_SIGNER_OPS) {
        expect(await answered(callOp(client, op, throwing)), op).toMatchObject(expectedOf(op, unavailable));
      }
    });

    it("a privileged op answers its capability provider's failure unchanged, where it would reach the enclave", async () => {
      const client = open();
      // What a minter answers when its capability_counter timed out.
      const failure = signerFailure(CLIENT_FAILURE.timeout, "no reply within 10 ms");
      const refusing: CapabilityProvider = async () => err(failure);
      for (const op of PRIVILEGED_SIGNER_OPS) {
        const result = await answered(callOp(client, op, refusing));
        if (dormant.has(op)) expect(result, op).toMatchObject(DORMANT_ANSWER);
        else expect(result, op).toEqual({ ok: false, error: failure });
      }
    });

    it("close() resolves twice, used or not; then every op answers a failure (retryable signer_client_closed where it would reach the enclave)", async () => {
      const unused = open();
      await unused.close();
      await unused.close();
      const used = open();
      await answered(used.getPolicy());
      await used.close();
      await used.close();
      for (const [client, which] of [
        [unused, "unused"],
        [used, "used"],
      ] as const) {
        for (const op of SIGNER_OPS) {
          const result = await answered(callOp(client, op));
          expect(result, `${which} ${op}`).toMatchObject(
            expectedOf(op, retryable(CLIENT_FAILURE.clientClosed)),
          );
        }
      }
    });

    it("a request larger than a frame answers a failure, and the client goes on serving", async () => {
      const client = open();
      const tooLarge = await answered(client.verifyBackup({ envelope: new Uint8Array(MAX_FRAME_BYTES + 1) }));
      expect(tooLarge).toMatchObject(
        expectedOf("verifyBackup", {
          ok: false,
          error: { class: "terminal_unknown", code: CLIENT_FAILURE.requestTooLarge },
        }),
      );
      expect(await answered(client.getPolicy())).toMatchObject(expectedOf("getPolicy", { ok: true }));
    });

    if ("startEnclave" in target) describeEnclaveConformance(subject);
  });
}
