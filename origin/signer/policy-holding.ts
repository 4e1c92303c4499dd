/**
 * Whether the enclave in use holds the spending policies the database stores, and the node's
 * freeze. A recovered enclave holds the agents' keys and nothing else: until the operator seals the
 * policies again (`npm run policy -- reseal`), it enforces none of the limits they set against a
 * compromised origin, while the gateway, reading the database, still shows and applies them. The
 * origin still starts (it applies the stored policies itself); /healthz says `degraded` with the
 * instruction, and the start logs it.
 *
 * An enclave is behind on a policy when its version of the key's policy is lower than the stored
 * one and it holds another document: a change is sealed before it is stored, so an enclave
 * mid-change is ahead, never behind.
 */
import { asc, desc, eq } from "drizzle-orm";
import { type AgentPolicyDocument, samePolicyDocument } from "../../shared/agent-policy.ts";
import type { Db } from "../db/client.ts";
import { agentIdentities, agentPolicies, nodePolicy } from "../db/schema.ts";
import { distinctKeyRefs } from "./key-holding.ts";
import type { SignerClient } from "./types.ts";

/** What an operator does about it: the same words at start and in /healthz. */
export const RESEAL_POLICIES_INSTRUCTION =
  'the enclave does not hold the spending policies this database stores (it was recovered, or is another enclave), so it enforces none of their limits whatever the origin asks: run `npm run policy -- reseal` (docs/operations.md, "Disaster recovery", step 4)';

export type PolicyHoldingReport = {
  /** Stored policies asked about: the oldest and the newest change's (0 with none stored). */
  checked: number;
  /** Of those, policies the enclave holds an older version of, or none. */
  behind: number;
  /** The database has the node frozen and the enclave does not. */
  freeze_missing: boolean;
  /** True when nothing checked is behind; false when something is, or the enclave did not answer. */
  ok: boolean;
  /** The signer failure's code when the enclave could not be asked. */
  error?: string;
  instruction?: string;
};

/**
 * Asks the enclave about the oldest and the newest stored policy change, and, when the database
 * has the node frozen, about the freeze: a recovered enclave misses all of them, and a few reads
 * keep /healthz cheap however many agents there are.
 */
export async function checkStoredPoliciesHeld(
  db: Db,
  signer: Pick<SignerClient, "getAgentPolicy" | "getPolicy">,
): Promise<PolicyHoldingReport> {
  const columns = {
    keyRef: agentIdentities.agentTransferKeyRef,
    version: agentPolicies.version,
    document: agentPolicies.policy,
  };
  const stored = () =>
    db
      .select(columns)
      .from(agentPolicies)
      .innerJoin(agentIdentities, eq(agentIdentities.agentId, agentPolicies.agentId))
      .limit(1)
      .$dynamic();
  const [oldest, newest, node] = await Promise.all([
    stored().orderBy(asc(agentPolicies.updatedAt)),
    stored().orderBy(desc(agentPolicies.updatedAt)),
    db.select({ frozen: nodePolicy.frozen }).from(nodePolicy).limit(1),
  ]);
  const policies = distinctKeyRefs([...oldest, ...newest]);
  const failed = (code: string): PolicyHoldingReport => ({
    checked: policies.length,
    behind: 0,
    freeze_missing: false,
    ok: false,
    error: code,
  });
  let behind = 0;
  for (const policy of policies) {
    const held = await signer.getAgentPolicy({ keyRef: policy.keyRef });
    if (!held.ok) return failed(held.error.code);
    const same = samePolicyDocument(held.value.policy, policy.document as AgentPolicyDocument);
    if (held.value.version < policy.version && !same) behind++;
  }
  let freezeMissing = false;
  if (node[0]?.frozen) {
    const sealed = await signer.getPolicy();
    if (!sealed.ok) return failed(sealed.error.code);
    freezeMissing = !sealed.value.nodeFrozen;
  }
  const report = { checked: policies.length, behind, freeze_missing: freezeMissing };
  return behind === 0 && !freezeMissing
    ? { ...report, ok: true }
    : { ...report, ok: false, instruction: RESEAL_POLICIES_INSTRUCTION };
}
