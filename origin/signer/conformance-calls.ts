/**
 * What the SignerClient conformance suite (conformance.ts) calls and how it reads the answers: one
 * sample call of every op, and the checks every answer must pass.
 */
import { randomBytes, randomUUID } from "node:crypto";
import type { Address } from "viem";
import { expect } from "vitest";
import { authorityPublicKey, mintCapability, randomAuthoritySecret } from "../../shared/capability.ts";
import { CHAIN_ID } from "../../shared/constants.ts";
import { REFUSAL_DETAILS } from "../../shared/enclave-protocol.ts";
import type { Hex } from "../../shared/hex.ts";
import { ok } from "../../shared/result.ts";
import { CLIENT_FAILURE, classifyFailureCode } from "./failure-class.ts";
import type {
  CapabilityProvider,
  SignerClient,
  SignerPolicy,
  SignerResult,
  SignTransactionParams,
} from "./types.ts";

/** Every op of the interface; close() is not an op (it answers nothing). */
export type SignerOp = Exclude<keyof SignerClient, "close">;

export const UNKNOWN_KEY = "ab".repeat(32);
const ALICE: Address = "0x1111111111111111111111111111111111111111";
const BOB: Address = "0x2222222222222222222222222222222222222222";
const hex32 = (): Hex => `0x${randomBytes(32).toString("hex")}`;

/** Limits wide enough for every signing of the suite; the per-transaction one is what it exceeds. */
export const CONFORMANCE_POLICY: SignerPolicy = {
  perTxLimitUnits: 1_000_000n,
  dailyLimitUnits: 1_000_000_000n,
  recipientAllowlist: null,
  x402AmountUnits: 10_000n,
  x402PayTo: BOB,
  x402MaxTimeoutSeconds: 180,
  operatorPool: "0x00000000000000000000000000000000000000aa",
  feeCeilingWei: 10n ** 15n,
  x402ValidityMarginSeconds: 6,
  x402DailyLimit: 1000,
  settlerDailyFeeUnits: 1_000_000_000n,
};

/** A capability well formed and signed, by an authority no enclave was sealed with. */
const STRANGER = randomAuthoritySecret();
const strangerCapability: CapabilityProvider = async ({ op, params }) =>
  ok(
    mintCapability({
      authoritySecret: STRANGER,
      op,
      params,
      requestId: `conformance-${randomUUID()}`,
      chainId: CHAIN_ID,
      envId: "conformance",
      instanceId: `0x${"00".repeat(16)}`,
      counter: 1,
    }),
  );

/** A transfer of 1 unit from a key the enclave does not hold, unless `overrides` name one. */
export function transferParams(
  nonce: bigint,
  overrides: Partial<SignTransactionParams> = {},
): SignTransactionParams {
  return {
    keyRef: UNKNOWN_KEY,
    from: ALICE,
    chainId: CHAIN_ID,
    to: BOB,
    valueUnits: 1n,
    nonce,
    maxFeePerGas: 1_000_000_000n,
    maxPriorityFeePerGas: 1_000_000_000n,
    gasLimit: 21_000n,
    ...overrides,
  };
}

/** What a sample call comes to against the real enclave: an answer, or a refusal's code. */
type LiveAnswer = { ok: true } | { code: string };

/**
 * One call of an op, given the op alone (taken off its client, as callers take it) and the
 * capability provider a privileged op is called with.
 */
type SampleCall<Op extends SignerOp> = {
  /** What the call asks, for the case's name. */
  asks: string;
  live: LiveAnswer;
  /** Whether the op takes a capability provider (the type checks it against the interface). */
  privileged: Parameters<SignerClient[Op]> extends [unknown, CapabilityProvider] ? true : false;
  call: (op: SignerClient[Op], authorize: CapabilityProvider) => Promise<SignerResult<unknown>>;
};

const NOT_HELD: LiveAnswer = { code: "key_purpose_mismatch" };
const STRANGER_REFUSED: LiveAnswer = { code: "capability_rejected" };
const STRANGERS = "under a stranger's capability";

/**
 * A call of every op (a missing or unknown op is a type error here). Each asks what the enclave
 * refuses where it can: a key it does not hold (the answer the sweep, key-holding.ts and the money
 * routes read as "not held"), a capability of an authority it was not sealed with.
 */
export const SAMPLE_CALLS: { [Op in SignerOp]: SampleCall<Op> } = {
  generateKeys: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) => op({ namespace: "agent-transfer", count: 1, batchId: randomUUID() }, authorize),
  },
  exportBackup: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) => op({ batchId: randomUUID(), keyRefs: [UNKNOWN_KEY] }, authorize),
  },
  verifyBackup: {
    asks: "of bytes that are no envelope",
    live: { code: "malformed" },
    privileged: false,
    call: (op) => op({ envelope: Uint8Array.of(1) }),
  },
  restoreBackup: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) => op({ envelope: Uint8Array.of(1) }, authorize),
  },
  loadRecoveryKey: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) =>
      op({ transportPublicKey: hex32(), enc: hex32(), ct: `0x${"11".repeat(48)}` }, authorize),
  },
  newTransportKey: { asks: "", live: { ok: true }, privileged: false, call: (op) => op() },
  getSealedIdentity: { asks: "", live: { ok: true }, privileged: false, call: (op) => op() },
  configureTreasury: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) =>
      op({ payoutUnits: 1n, cooldownMs: 1, dailyLimitUnits: 1n, budgetUnits: 1n }, authorize),
  },
  configurePolicy: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) => op(CONFORMANCE_POLICY, authorize),
  },
  configureSettler: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) => op({}, authorize),
  },
  configurePayee: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) => op({}, authorize),
  },
  signX402Offer: {
    asks: "naming a payee the enclave's payee key is not",
    live: NOT_HELD,
    privileged: false,
    call: (op) =>
      op({
        payeeAddress: ALICE,
        resourceUrl: "https://example.test/x402/demo",
        scheme: "exact",
        network: `eip155:${CHAIN_ID}`,
        asset: "0x2d00000000000000000000000000000000000006",
        payTo: BOB,
        amount: "10000",
        validForSeconds: 60,
      }),
  },
  signX402Receipt: {
    asks: "naming a payee the enclave's payee key is not",
    live: NOT_HELD,
    privileged: false,
    call: (op) =>
      op({
        payeeAddress: ALICE,
        resourceUrl: "https://example.test/x402/demo",
        network: `eip155:${CHAIN_ID}`,
        payer: BOB,
        transaction: hex32(),
      }),
  },
  publicIdentity: {
    asks: "of a key not held",
    live: NOT_HELD,
    privileged: false,
    call: (op) => op({ keyRef: UNKNOWN_KEY }),
  },
  proveIdentity: {
    asks: "of a key not held",
    live: NOT_HELD,
    privileged: false,
    call: (op) => op({ keyRef: UNKNOWN_KEY, verifierNonce: hex32() }),
  },
  signTransfer: {
    asks: "with a key not held",
    live: NOT_HELD,
    privileged: false,
    call: (op) => op(transferParams(0n)),
  },
  signFaucet: {
    asks: "with a key not held",
    live: NOT_HELD,
    privileged: false,
    call: (op) => op(transferParams(0n)),
  },
  signX402Authorization: {
    asks: "with a key not held",
    live: NOT_HELD,
    privileged: false,
    call: (op) =>
      op({
        keyRef: UNKNOWN_KEY,
        from: ALICE,
        to: BOB,
        valueUnits: 1n,
        validAfter: 0n,
        validBefore: 1n,
        nonce: hex32(),
      }),
  },
  signSettlement: {
    asks: "with a key not held",
    live: NOT_HELD,
    privileged: false,
    call: (op) =>
      op({
        keyRef: UNKNOWN_KEY,
        chainId: CHAIN_ID,
        authorization: { from: ALICE, to: BOB, value: 1n, validAfter: 0n, validBefore: 1n, nonce: hex32() },
        signature: `0x${"11".repeat(65)}`,
        nonce: 0n,
        maxFeePerGas: 1n,
        maxPriorityFeePerGas: 1n,
        gasLimit: 100_000n,
      }),
  },
  signFiller: {
    asks: "with a key not held",
    live: NOT_HELD,
    privileged: false,
    call: (op) =>
      op({
        keyRef: UNKNOWN_KEY,
        from: ALICE,
        chainId: CHAIN_ID,
        nonce: 0n,
        maxFeePerGas: 1n,
        maxPriorityFeePerGas: 1n,
      }),
  },
  capabilityCounter: {
    asks: "",
    live: { ok: true },
    privileged: false,
    call: (op) => op({ authority: authorityPublicKey(STRANGER), scope: "admin", op: "generate_keys" }),
  },
  getPolicy: { asks: "", live: { ok: true }, privileged: false, call: (op) => op() },
  setAgentPolicy: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) => op({ keyRef: UNKNOWN_KEY, policy: { frozen: true } }, authorize),
  },
  setNodeFrozen: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) => op({ frozen: true }, authorize),
  },
  enrollOperatorKey: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) => op({ keyId: "conformance", publicKey: `0x04${"11".repeat(64)}` }, authorize),
  },
  enrollOperatorPasskey: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) =>
      op(
        {
          keyId: "conformance-passkey",
          operator: "Conformance",
          credentialId: "Y29uZm9ybWFuY2UtY3JlZGVudGlhbA",
          publicKey: `0x04${"11".repeat(64)}`,
          rpId: "localhost",
          origin: "http://localhost:8080",
        },
        authorize,
      ),
  },
  revokeOperatorKey: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) => op({ keyId: "conformance-operator" }, authorize),
  },
  revokeOperatorPasskey: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) =>
      op({ keyId: "conformance-passkey", credentialId: "Y29uZm9ybWFuY2UtY3JlZGVudGlhbA" }, authorize),
  },
  approveHeld: {
    asks: STRANGERS,
    live: STRANGER_REFUSED,
    privileged: true,
    call: (op, authorize) =>
      op(
        {
          keyRef: UNKNOWN_KEY,
          kind: "transfer",
          ref: randomUUID(),
          to: BOB,
          valueUnits: 1n,
          expiresAt: Math.floor(Date.now() / 1000) + 60,
          operator: { keyId: "conformance", counter: 1, expiresAt: 1, signature: `0x${"11".repeat(64)}` },
        },
        authorize,
      ),
  },
  getAgentPolicy: {
    asks: "of a key not held",
    live: NOT_HELD,
    privileged: false,
    call: (op) => op({ keyRef: UNKNOWN_KEY }),
  },
};

export const SIGNER_OPS = Object.keys(SAMPLE_CALLS) as SignerOp[];
export const PRIVILEGED_SIGNER_OPS = SIGNER_OPS.filter((op) => SAMPLE_CALLS[op].privileged);

/** The op's sample call, the op taken off `client` first. */
export function callOp<Op extends SignerOp>(
  client: SignerClient,
  op: Op,
  authorize: CapabilityProvider = strangerCapability,
): Promise<SignerResult<unknown>> {
  const sample: SampleCall<Op> = SAMPLE_CALLS[op];
  return sample.call(client[op], authorize);
}

/** What the sample call of `op` answers from the real enclave, as a matcher. */
export function liveAnswerOf(op: SignerOp): object {
  const { live } = SAMPLE_CALLS[op];
  return "ok" in live
    ? { ok: true }
    : { ok: false, error: { code: live.code, class: classifyFailureCode(live.code) } };
}

/** The dormant stub's answer (docs/operations.md#switching-a-node-to-live-signing), as a matcher. */
export const DORMANT_ANSWER = {
  ok: false,
  error: { class: "terminal_unknown", code: CLIENT_FAILURE.protocolUnavailable },
} as const;

/** A retryable failure of `code`, as a matcher. */
export function retryable(code: string | RegExp): object {
  return {
    ok: false,
    error: { class: "retryable", code: typeof code === "string" ? code : expect.stringMatching(code) },
  };
}

/**
 * Awaits an op's answer and checks it is a Result: the test fails if the op threw (an expected
 * failure is never an exception), or if a failure's class is not the one failure-class.ts gives
 * its code, or its detail is not a known sealed bound.
 */
export async function answered(promise: Promise<SignerResult<unknown>>): Promise<SignerResult<unknown>> {
  const outcome = await promise.then(
    (result) => ({ result }),
    (error: unknown) => ({ error }),
  );
  if ("error" in outcome) expect.fail(`the op threw instead of answering a Result: ${String(outcome.error)}`);
  const result = outcome.result;
  expect(typeof result === "object" && result !== null && typeof result.ok === "boolean").toBe(true);
  if (result.ok) {
    expect(result).toHaveProperty("value");
    return result;
  }
  const { class: failureClass, code, reason, detail, rule, ...rest } = result.error;
  expect(rest).toEqual({});
  expect(typeof code).toBe("string");
  expect(typeof reason).toBe("string");
  expect(failureClass).toBe(classifyFailureCode(code));
  if (detail !== undefined) expect(REFUSAL_DETAILS).toContain(detail);
  if (rule !== undefined) expect(typeof rule).toBe("string");
  return result;
}
