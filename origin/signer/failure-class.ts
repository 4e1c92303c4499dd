/**
 * Failure codes the client produces itself, and the one table mapping every code (the enclave's
 * codes and ours) to a finding's class (docs/operations.md#what-a-finding-means).
 */
import type { RefusalDetail } from "../../shared/enclave-protocol.ts";
import type { SignerFailure, SignerFailureClass } from "./types.ts";

/** Codes produced on the origin side of the socket. */
export const CLIENT_FAILURE = {
  /** Connecting failed (no socket file, refused, handshake never completed). */
  unreachable: "signer_unreachable",
  /** No reply within the request timeout. */
  timeout: "signer_timeout",
  /** The connection closed while the request was in flight. */
  connectionLost: "signer_connection_lost",
  /** close() was called. */
  clientClosed: "signer_client_closed",
  /** The peer is not a svc-hsm/agent/v1 enclave. */
  protocolMismatch: "protocol_mismatch",
  /** A reply that does not decode or does not match the op's schema. */
  malformedReply: "malformed_reply",
  /** The capability provider could not mint (key file missing, counter query failed terminally). */
  capabilityUnavailable: "capability_unavailable",
  /** The request itself could not be encoded (larger than a frame). */
  requestTooLarge: "request_too_large",
  /** The dormant stub's answer (docs/operations.md#switching-a-node-to-live-signing). */
  protocolUnavailable: "agent_signer_protocol_unavailable",
} as const;

/** The sweep class of a failure code (exhaustive over known codes; unknown → terminal_unknown). */
export function classifyFailureCode(code: string): SignerFailureClass {
  switch (code) {
    // Transport failures before the enclave answered: try again next tick.
    case CLIENT_FAILURE.unreachable:
    case CLIENT_FAILURE.timeout:
    case CLIENT_FAILURE.connectionLost:
    case CLIENT_FAILURE.clientClosed:
      return "retryable";
    // Protocol mismatch. The enclave's `malformed` means it could not read our request: version
    // skew between client and enclave, not a bad reply.
    case "wrong_profile":
    case "malformed":
    case CLIENT_FAILURE.protocolMismatch:
      return "terminal_wire";
    case "not_configured":
    case "seal_failed":
    case "capability_rejected":
    case CLIENT_FAILURE.capabilityUnavailable:
      return "terminal_config";
    case "key_purpose_mismatch":
    case "cap_exceeded":
      return "terminal_agent";
    case CLIENT_FAILURE.malformedReply:
      return "terminal_malformed";
    default:
      // Includes agent_signer_protocol_unavailable (docs/operations.md#what-a-finding-means) and
      // request_too_large.
      return "terminal_unknown";
  }
}

/**
 * A failure with its class filled in (and the enclave's refusal detail and agent policy rule, when
 * it gave them).
 */
export function signerFailure(
  code: string,
  reason: string,
  detail?: RefusalDetail,
  rule?: string,
): SignerFailure {
  const failure: SignerFailure = { class: classifyFailureCode(code), code, reason };
  if (detail !== undefined) failure.detail = detail;
  if (rule !== undefined) failure.rule = rule;
  return failure;
}
