/**
 * The live SignerClient over the enclave socket. Privileged calls of one op run one at a time per
 * client, so a capability provider that asks `capability_counter` and mints sees contiguous
 * counters (the enclave refuses a gap or a replay). The enclave counts each op apart (its counter
 * is per authority, scope and op), so calls of different ops run side by side: the key-pool
 * refill exports one batch's backup while it generates the next. A call whose counter another
 * client of the same authority took meanwhile (another origin) is minted again with the next one.
 */

import type { Logger } from "pino";
import type { Capability } from "../../shared/capability.ts";
import type { EnclaveOp, PrivilegedOp } from "../../shared/enclave-protocol.ts";
import { errorMessage } from "../../shared/error-message.ts";
import type { Hex } from "../../shared/hex.ts";
import { err, ok } from "../../shared/result.ts";
import { CLIENT_FAILURE, signerFailure } from "./failure-class.ts";
import { OP_CODECS, type OpParams, type OpResult } from "./op-codecs.ts";
import { SocketTransport } from "./socket-transport.ts";
import type { CapabilityProvider, SignerClient, SignerResult } from "./types.ts";

export type SocketSignerClientOptions = {
  socketPath: string;
  /** Default per-request timeout (identity proofs, signing). */
  requestTimeoutMs?: number;
  /** Timeout of ops that write key sets or carry envelopes (generate, export, verify, restore). */
  slowRequestTimeoutMs?: number;
  connectTimeoutMs?: number;
  backoff?: { initialMs: number; maxMs: number };
  logger?: Logger;
};

const SLOW_OPS: ReadonlySet<EnclaveOp> = new Set([
  "generate_keys",
  "export_backup",
  "verify_backup",
  "restore_backup",
]);

/**
 * How many times a privileged call whose counter another client took is minted again. Each retry
 * follows a call of that other client that the enclave accepted, so a few are enough for the
 * origins and tools that share an authority.
 */
const COUNTER_TAKEN_RETRIES = 5;

/** A SignerClient speaking to the enclave at `socketPath`; connects on first use. */
/** How long a signing request waits for the enclave's answer (a batch holds its senders' locks meanwhile). */
export const SIGNER_REQUEST_TIMEOUT_MS = 10_000;

export function createSocketSignerClient(options: SocketSignerClientOptions): SignerClient {
  const transport = new SocketTransport({
    socketPath: options.socketPath,
    connectTimeoutMs: options.connectTimeoutMs,
    backoff: options.backoff,
    logger: options.logger,
  });
  const requestTimeoutMs = options.requestTimeoutMs ?? SIGNER_REQUEST_TIMEOUT_MS;
  const slowRequestTimeoutMs = options.slowRequestTimeoutMs ?? 60_000;
  /** Per op, the last privileged call queued: the next of that op starts once it has ended. */
  const privilegedChains = new Map<PrivilegedOp, Promise<unknown>>();

  const send = async <Op extends EnclaveOp>(
    op: Op,
    wireParams: Record<string, unknown>,
    cap?: unknown,
    timeoutOverrideMs?: number,
  ): Promise<SignerResult<OpResult<Op>>> => {
    const timeoutMs = timeoutOverrideMs ?? (SLOW_OPS.has(op) ? slowRequestTimeoutMs : requestTimeoutMs);
    const outcome = await transport.request(op, wireParams, cap, timeoutMs);
    if (!outcome.ok)
      return err(
        signerFailure(outcome.error.code, outcome.error.reason, outcome.error.detail, outcome.error.rule),
      );
    const parsed = OP_CODECS[op].result.safeParse(outcome.value);
    if (!parsed.success) {
      options.logger?.warn({ op }, "enclave reply does not match the op schema");
      return err(signerFailure(CLIENT_FAILURE.malformedReply, `reply to ${op} does not match its schema`));
    }
    return ok(parsed.data as OpResult<Op>);
  };

  const call = <Op extends Exclude<EnclaveOp, PrivilegedOp>>(op: Op) => {
    const toWire = OP_CODECS[op].toWire as (params: OpParams<Op>) => Record<string, unknown>;
    return (params: OpParams<Op>): Promise<SignerResult<OpResult<Op>>> => send(op, toWire(params));
  };

  const capabilityCounter = call("capability_counter");
  /** True when the enclave has accepted `cap`'s counter from someone else since it was minted. */
  const counterTaken = async (op: PrivilegedOp, cap: Capability): Promise<boolean> => {
    const next = await capabilityCounter({ authority: cap.authority as Hex, scope: cap.scope, op });
    return next.ok && next.value.nextCounter > cap.counter;
  };

  const privileged = <Op extends PrivilegedOp>(op: Op) => {
    const toWire = OP_CODECS[op].toWire as (params: OpParams<Op>) => Record<string, unknown>;
    return (params: OpParams<Op>, authorize: CapabilityProvider): Promise<SignerResult<OpResult<Op>>> => {
      const run = async (): Promise<SignerResult<OpResult<Op>>> => {
        const wireParams = toWire(params);
        let rejected: { counter: number; result: SignerResult<OpResult<Op>> } | undefined;
        for (let retry = 0; ; retry += 1) {
          const cap = await authorize({ op, params: wireParams }).catch(
            (error: unknown): SignerResult<never> =>
              err(signerFailure(CLIENT_FAILURE.capabilityUnavailable, errorMessage(error))),
          );
          if (!cap.ok) return cap;
          // A provider that cannot mint anew (a capability minted offline) gets its answer once.
          if (rejected && cap.value.counter <= rejected.counter) return rejected.result;
          const result = await send(op, wireParams, cap.value);
          // Calls take turns within this client only: another client minting from the same
          // authority (another origin's refill, an operator's tool) may have taken the counter
          // between our read of it and our call. Mint again with the next one; any other
          // rejection stands.
          const lostCounter =
            !result.ok &&
            result.error.code === "capability_rejected" &&
            retry < COUNTER_TAKEN_RETRIES &&
            (await counterTaken(op, cap.value));
          if (!lostCounter) return result;
          rejected = { counter: cap.value.counter, result };
        }
      };
      const result = (privilegedChains.get(op) ?? Promise.resolve()).then(run, run);
      privilegedChains.set(op, result);
      return result;
    };
  };

  return {
    generateKeys: privileged("generate_keys"),
    exportBackup: privileged("export_backup"),
    verifyBackup: call("verify_backup"),
    restoreBackup: privileged("restore_backup"),
    loadRecoveryKey: privileged("load_recovery_key"),
    newTransportKey: () => send("new_transport_key", {}),
    getSealedIdentity: () => send("get_sealed_identity", {}),
    configureTreasury: privileged("configure_treasury"),
    configurePolicy: privileged("configure_policy"),
    configureSettler: privileged("configure_settler"),
    configurePayee: privileged("configure_payee"),
    publicIdentity: call("public_identity"),
    proveIdentity: call("prove_identity"),
    signTransfer: call("sign_transfer"),
    signFaucet: call("sign_faucet"),
    signX402Authorization: call("sign_x402_authorization"),
    signSettlement: call("sign_settlement"),
    signFiller: call("sign_filler"),
    signX402Offer: call("sign_x402_offer"),
    signX402Receipt: call("sign_x402_receipt"),
    capabilityCounter: call("capability_counter"),
    getPolicy: (getOptions = {}) => send("get_policy", {}, undefined, getOptions.timeoutMs),
    setAgentPolicy: privileged("set_agent_policy"),
    setNodeFrozen: privileged("set_node_frozen"),
    enrollOperatorKey: privileged("enroll_operator_key"),
    enrollOperatorPasskey: privileged("enroll_operator_passkey"),
    revokeOperatorKey: privileged("revoke_operator_key"),
    revokeOperatorPasskey: privileged("revoke_operator_passkey"),
    approveHeld: privileged("approve_held"),
    getAgentPolicy: call("get_agent_policy"),
    close: () => transport.close(),
  };
}
