/**
 * Capability verification: signature, authority of the op's tier, op, chain, env,
 * this enclave's instance id, scope, payload binding and the next contiguous counter. Every failure is the
 * one code
 * `capability_rejected`. This check is pure: the caller reserves the counter afterwards.
 */
import {
  type Capability,
  capabilityCounterKey,
  capabilitySchema,
  payloadBinding,
  verifyCapabilitySignature,
} from "../shared/capability.ts";
import { type CapabilityScope, PRIVILEGED_OP_SCOPE, type PrivilegedOp } from "../shared/enclave-protocol.ts";
import type { EnclaveState } from "./enclave-state.ts";
import type { SealedConfig } from "./sealed-config.ts";

export type AcceptedCapability = { counterKey: string; counter: number; cap: Capability };

/** Returns the accepted capability, or null when any check fails. */
export function checkCapability(
  config: SealedConfig,
  state: EnclaveState,
  op: PrivilegedOp,
  rawParams: unknown,
  rawCap: unknown,
): AcceptedCapability | null {
  const parsed = capabilitySchema.safeParse(rawCap);
  if (!parsed.success) return null;
  const cap = parsed.data;
  const scope = PRIVILEGED_OP_SCOPE[op];
  const authority = authorityOfScope(config, scope);
  if (cap.op !== op || cap.scope !== scope || cap.authority !== authority) return null;
  if (cap.chain_id !== config.chain_id || cap.env_id !== config.env_id) return null;
  // Counters are per (authority, env, scope, op) and start at 1 in a replacement enclave
  // initialised with the same env and keys: only the instance id tells a capability minted for
  // the lost enclave (and recorded on its way there) from one minted for this one.
  if (cap.instance_id !== config.instance_id) return null;
  let binding: string;
  try {
    binding = payloadBinding(op, rawParams);
  } catch {
    return null;
  }
  if (binding !== cap.payload_binding) return null;
  if (!verifyCapabilitySignature(cap)) return null;
  const counterKey = capabilityCounterKey(cap.authority, cap.env_id, cap.scope, op);
  const next = (state.counters.get(counterKey) ?? 0) + 1;
  // Strictly contiguous: a replay (counter < next) and a gap (counter > next) are both refused.
  if (cap.counter !== next) return null;
  return { counterKey, counter: cap.counter, cap };
}

/**
 * The sealed authority of each tier (docs/enclave.md, "Keys and where production keeps them"); exhaustive
 * over the scopes.
 */
function authorityOfScope(config: SealedConfig, scope: CapabilityScope): string {
  switch (scope) {
    case "admin":
      return config.admin_authority;
    case "policy":
      return config.policy_authority;
    case "recovery":
      return config.recovery_authority;
  }
}
