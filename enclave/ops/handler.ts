/** Shape of an op handler: wire params in, an outcome with the wire result out. */
import type { WireParams, WireResult } from "../../shared/enclave-ops.ts";
import type { EnclaveOp } from "../../shared/enclave-protocol.ts";
import type { EnclaveContext } from "../context.ts";
import type { KeyEntry } from "../keystore.ts";
import type { OpOutcome } from "../outcome.ts";

export type OpHandler<Op extends EnclaveOp> = (
  ctx: EnclaveContext,
  params: WireParams<Op>,
) => OpOutcome<WireResult<Op>> | Promise<OpOutcome<WireResult<Op>>>;

/** Public part of a key, as every op returns it. */
export function publicInfo(key: KeyEntry): { key_ref: string; public_key: string; address: string } {
  return { key_ref: key.keyRef, public_key: key.publicKeyHex, address: key.address };
}
