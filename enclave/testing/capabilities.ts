/** Minting helpers for the enclave's integration tests. */

import { authorityPublicKey, type Capability, mintCapability } from "../../shared/capability.ts";
import { CHAIN_ID } from "../../shared/constants.ts";
import {
  type CapabilityScope,
  PRIVILEGED_OP_SCOPE,
  type PrivilegedOp,
} from "../../shared/enclave-protocol.ts";
import type { EnclaveFixture } from "../../testing/enclave-process.ts";
import { expectOk, type RawEnclaveClient } from "./raw-client.ts";

/** The next counter the enclave expects from `secret` for `op`. */
export async function nextCounter(
  client: RawEnclaveClient,
  secret: Uint8Array,
  op: PrivilegedOp,
): Promise<number> {
  const result = expectOk(
    await client.request("capability_counter", {
      authority: authorityPublicKey(secret),
      scope: PRIVILEGED_OP_SCOPE[op],
      op,
    }),
  );
  return result.next_counter as number;
}

/** The instance id of the enclave at the other end of `client` (every capability names it). */
export async function instanceIdOf(client: RawEnclaveClient): Promise<string> {
  return expectOk(await client.request("get_sealed_identity", {})).instance_id as string;
}

/** The fixture's authority secret of one tier. */
export function secretOfScope(fixture: EnclaveFixture, scope: CapabilityScope): Uint8Array {
  switch (scope) {
    case "admin":
      return fixture.adminSecret;
    case "policy":
      return fixture.policySecret;
    case "recovery":
      return fixture.recoverySecret;
  }
}

/** A capability for `op` over `params` from the fixture's authority of the op's tier. */
export async function mintFor(
  client: RawEnclaveClient,
  fixture: EnclaveFixture,
  op: PrivilegedOp,
  params: Record<string, unknown>,
  overrides: Partial<{
    secret: Uint8Array;
    counter: number;
    envId: string;
    chainId: number;
    instanceId: string;
  }> = {},
): Promise<Capability> {
  const secret = overrides.secret ?? secretOfScope(fixture, PRIVILEGED_OP_SCOPE[op]);
  return mintCapability({
    authoritySecret: secret,
    op,
    params,
    requestId: `test-${op}-${Date.now()}`,
    chainId: overrides.chainId ?? CHAIN_ID,
    envId: overrides.envId ?? fixture.envId,
    instanceId: overrides.instanceId ?? (await instanceIdOf(client)),
    counter: overrides.counter ?? (await nextCounter(client, secret, op)),
  });
}

/** Sends a privileged request with a freshly minted capability and returns its result. */
export async function privileged(
  client: RawEnclaveClient,
  fixture: EnclaveFixture,
  op: PrivilegedOp,
  params: Record<string, unknown>,
): Promise<Record<string, unknown>> {
  return expectOk(await client.request(op, params, await mintFor(client, fixture, op, params)));
}
