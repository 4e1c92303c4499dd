import type { RefusalDetail } from "../../shared/enclave-protocol.ts";
import type { SignerFailure } from "./types.ts";

/**
 * A refusal's `detail` as the domain of one signing op reads it: one of `details` (the groups of
 * the bounds that op checks, shared/enclave-protocol.ts), or undefined. The enclave names only
 * bounds of the op it refused, so a detail of another group is none of this op's and reads as no
 * detail, as one this side does not know does; the domain's switch is then exhaustive over its
 * own groups.
 */
export function refusalDetailAmong<D extends RefusalDetail>(
  failure: Pick<SignerFailure, "detail">,
  details: readonly D[],
): D | undefined {
  const among = (detail: RefusalDetail): detail is D =>
    (details as readonly RefusalDetail[]).includes(detail);
  return failure.detail !== undefined && among(failure.detail) ? failure.detail : undefined;
}
