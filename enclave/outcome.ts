/**
 * Expected failures of an op are returned values, collapsed into the enclave's closed
 * error codes. Reasons are deliberately generic where a precise one would be an oracle.
 */
import type { EnclaveErrorCode, EnclaveFailure, RefusalDetail } from "../shared/enclave-protocol.ts";
import { err, ok, type Result } from "../shared/result.ts";

/** In-process only: dispatch.ts writes it on the wire as the protocol's `result` or `error`. */
export type OpOutcome<T> = Result<T, EnclaveFailure>;

/** A successful outcome. */
export function succeed<T>(result: T): OpOutcome<T> {
  return ok(result);
}

/** A refused outcome with one of the enclave's error codes, and which sealed bound refused it if one did. */
export function refuse(
  code: EnclaveErrorCode,
  reason: string,
  detail?: RefusalDetail,
): { ok: false; error: EnclaveFailure } {
  return err(detail === undefined ? { code, reason } : { code, reason, detail });
}

/** One answer for "no such key" and "key of another namespace": no oracle. */
export const KEY_NOT_USABLE = refuse("key_purpose_mismatch", "key not usable for this operation");
