import { and, asc, eq } from "drizzle-orm";
import { CHAIN_ID } from "../../shared/constants.ts";
import type { Db } from "../db/client.ts";
import { agentIdentities, keyPool } from "../db/schema.ts";
import { type IdentitySigner, proveIdentity } from "./prove.ts";

/** The canary's exit codes (docs/operations.md#switching-a-node-to-live-signing). */
export const CANARY_EXIT = { switch: 0, noCandidate: 1, doNotSwitch: 2 } as const;

export type CanaryResult = { exitCode: (typeof CANARY_EXIT)[keyof typeof CANARY_EXIT]; line: string };

/**
 * Proves one key with the node's own configuration and writes nothing. The candidate is the
 * oldest enabled identity's key, or else a free pool key; it must verify and the enclave must
 * have been built for this environment and chain.
 */
export async function runCanary(
  db: Db,
  signer: IdentitySigner,
  params: { envId: string },
): Promise<CanaryResult> {
  const [identity] = await db
    .select({ keyRef: agentIdentities.agentTransferKeyRef, wallet: agentIdentities.assignedWallet })
    .from(agentIdentities)
    .where(eq(agentIdentities.enabled, true))
    .orderBy(asc(agentIdentities.createdAt))
    .limit(1);
  const [free] = identity
    ? []
    : await db
        .select({ keyRef: keyPool.keyRef, wallet: keyPool.address })
        .from(keyPool)
        .where(and(eq(keyPool.status, "free")))
        .orderBy(asc(keyPool.createdAt))
        .limit(1);
  const candidate = identity ?? free;
  if (!candidate) {
    return {
      exitCode: CANARY_EXIT.noCandidate,
      line: "canary: no candidate key to probe (fill the key pool first)",
    };
  }
  const label = `key ${candidate.keyRef.slice(0, 12)}… (${candidate.wallet})`;

  const info = await signer.publicIdentity({ keyRef: candidate.keyRef });
  if (!info.ok) {
    return {
      exitCode: CANARY_EXIT.doNotSwitch,
      line: `canary: do not switch: ${label}: ${info.error.class} ${info.error.code}: ${info.error.reason}`,
    };
  }
  if (info.value.envId !== params.envId || info.value.chainId !== CHAIN_ID) {
    return {
      exitCode: CANARY_EXIT.doNotSwitch,
      line: `canary: do not switch: the enclave is built for env '${info.value.envId}' chain ${info.value.chainId}, this node is env '${params.envId}' chain ${CHAIN_ID}`,
    };
  }
  const outcome = await proveIdentity(
    signer,
    { keyRef: candidate.keyRef, assignedWallet: candidate.wallet as `0x${string}` },
    { chainId: CHAIN_ID, envId: params.envId },
  );
  if (!outcome.verified) {
    return {
      exitCode: CANARY_EXIT.doNotSwitch,
      line: `canary: do not switch: ${label}: ${outcome.class} ${outcome.code}: ${outcome.detail}`,
    };
  }
  return {
    exitCode: CANARY_EXIT.switch,
    line: `canary: verified ${label} for env '${params.envId}' chain ${CHAIN_ID}: safe to switch`,
  };
}
