/**
 * Every change of an agent's spending policy goes through here (the agent's PATCH, the operator's
 * `npm run policy -- set|freeze|unfreeze`, the console's passkey approvals): the change is checked
 * against what is stored, written with its audit, sealed by the enclave (which checks it again: a
 * loosening needs an operator's signature it verifies itself), and only then committed, under the
 * agent's row lock so two changes of one agent are sealed and stored in the same order. Written
 * before it is sealed, so a row or an audit the database refuses leaves the enclave unchanged; a
 * change the enclave refuses is rolled back; only a commit lost after the seal leaves the two apart.
 */
import { sql } from "drizzle-orm";
import {
  type AgentPolicyDocument,
  agentPolicySchema,
  loosenings,
  NO_AGENT_POLICY,
  type NodePayee,
  policyFromDocument,
  policyToDocument,
} from "../../shared/agent-policy.ts";
import type { OperatorApproval } from "../../shared/operator-approval.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { type Db, queryRows } from "../db/client.ts";
import type { CapabilityProvider, SignerClient, SignerFailure, SignerResult } from "../signer/types.ts";
import { type ChangedBy, storedPolicy, writeAgentPolicy, writeNodeFrozen } from "./store.ts";

/** The enclave ops a change is sealed with. */
export type PolicySealer = Pick<SignerClient, "setAgentPolicy" | "setNodeFrozen">;

export type PolicyChangeDeps = {
  db: Db;
  signer: PolicySealer;
  /** The origin's admin capability (or the operator tool's): the enclave's admin tier. */
  authorize: CapabilityProvider;
  /** The node's one sealed x402 payee and amount, what an agent without a payee list may pay. */
  nodePayee: NodePayee | null;
};

export type PolicyChangeError =
  /** The change allows more than the stored policy, and no operator signed it. */
  | { code: "loosening_requires_operator"; fields: string[] }
  /** The enclave refused or could not be asked: nothing changed. */
  | { code: "signer"; failure: SignerFailure };

export type PolicyChanged = { document: AgentPolicyDocument | null; version: number };

/**
 * Written in the change's own transaction, after the change: a record that must exist exactly when
 * the change does (the passkey approval's audit, origin/passkeys/approval.ts). Both commit, or neither.
 */
export type WithinChange = (tx: Db) => Promise<void>;

/**
 * The policy a change stores (null: none), or how to make it from the document stored when the
 * change holds the agent's lock (a merge patch): made from what another change stored just before,
 * not from what was read before waiting for it. It may throw to refuse the change.
 */
export type NextPolicy =
  | AgentPolicyDocument
  | null
  | ((stored: AgentPolicyDocument | null) => AgentPolicyDocument | null);

/**
 * Replaces the agent's policy with `next` (null: none). Without `operator`, only a change that
 * tightens is made; the enclave holds the last word either way.
 */
export async function changeAgentPolicy(
  deps: PolicyChangeDeps,
  change: {
    agent: { agentId: string; keyRef: string };
    next: NextPolicy;
    changedBy: ChangedBy;
    operator?: OperatorApproval;
    withinChange?: WithinChange;
  },
): Promise<Result<PolicyChanged, PolicyChangeError>> {
  const { agent, changedBy, operator } = change;
  return unsealedRollsBack(deps.db, async (tx) => {
    // The identity's row lock orders two changes of one agent, across origins.
    await tx.execute(sql`select 1 from agent_identities where agent_id = ${agent.agentId} for update`);
    const [row] = await queryRows<{ policy: unknown; version: number }>(
      tx,
      sql`select policy, version from agent_policies where agent_id = ${agent.agentId}`,
    );
    const before = row ? storedPolicy(row.policy, row.version) : null;
    const requested = typeof change.next === "function" ? change.next(before?.document ?? null) : change.next;
    // The document as it is stored: canonical (what the operator's signature covers is this form).
    const next =
      requested === null ? null : policyToDocument(policyFromDocument(agentPolicySchema.parse(requested)));
    const loosened = loosenings(
      before?.policy ?? NO_AGENT_POLICY,
      next === null ? NO_AGENT_POLICY : policyFromDocument(next),
      deps.nodePayee,
    );
    if (loosened.length > 0 && !operator)
      return err({ code: "loosening_requires_operator", fields: loosened });
    // Stored with its audit before it is sealed: what the database refuses is never sealed, and
    // what the enclave refuses is rolled back (unsealedRollsBack).
    await writeAgentPolicy(tx, {
      agentId: agent.agentId,
      before: before?.document ?? null,
      after: next,
      version: (before?.version ?? 0) + 1,
      changedBy,
    });
    await change.withinChange?.(tx);
    const sealed = await racing(() =>
      deps.signer.setAgentPolicy(
        { keyRef: agent.keyRef, policy: next, ...(operator ? { operator } : {}) },
        deps.authorize,
      ),
    );
    if (!sealed.ok) throw new Unsealed({ code: "signer", failure: sealed.error });
    const { version } = sealed.value;
    // The enclave counts its own versions (a change it sealed whose row was lost counted there).
    if (next !== null && version !== (before?.version ?? 0) + 1) {
      await tx.execute(sql`update agent_policies set version = ${version} where agent_id = ${agent.agentId}`);
    }
    return ok({ document: next, version });
  });
}

/**
 * Freezes (admin alone) or unfreezes (an operator's signature) every agent of the node. The
 * operator's approval comes with `freezeEpoch`, the enclave's node_freeze_epoch it was signed over:
 * the enclave lifts only that freeze (operator_policy_changed when another holds now).
 */
export async function changeNodeFrozen(
  deps: PolicyChangeDeps,
  change: {
    frozen: boolean;
    changedBy: ChangedBy;
    operator?: { approval: OperatorApproval; freezeEpoch: number };
    withinChange?: WithinChange;
  },
): Promise<Result<{ frozen: boolean }, PolicyChangeError>> {
  const { frozen, changedBy, operator } = change;
  if (!frozen && !operator) return err({ code: "loosening_requires_operator", fields: ["node.frozen"] });
  return unsealedRollsBack(deps.db, async (tx) => {
    // The freeze as stored, under its lock: the audit's before is what the change found, which is
    // not always the opposite of what it sets (an unfreeze approved on a node not frozen).
    const [stored] = await queryRows<{ frozen: boolean }>(
      tx,
      sql`select frozen from node_policy where id = 1 for update`,
    );
    // As an agent's policy: stored with its audit first, rolled back if the enclave refuses.
    await writeNodeFrozen(tx, { before: stored?.frozen ?? false, frozen }, changedBy);
    await change.withinChange?.(tx);
    const sealed = await deps.signer.setNodeFrozen(
      { frozen, ...(operator ? { operator: operator.approval, freezeEpoch: operator.freezeEpoch } : {}) },
      deps.authorize,
    );
    if (!sealed.ok) throw new Unsealed({ code: "signer", failure: sealed.error });
    return ok({ frozen });
  });
}

/** The enclave refused (or did not answer) a change already written in its transaction. */
class Unsealed extends Error {
  constructor(readonly refusal: PolicyChangeError) {
    super("the enclave did not seal the change");
  }
}

/**
 * Runs a change in one transaction that an Unsealed thrown from it rolls back (the rows and audit
 * written before the seal), answering its refusal; anything else thrown is rethrown.
 */
async function unsealedRollsBack<T>(
  db: Db,
  change: (tx: Db) => Promise<Result<T, PolicyChangeError>>,
): Promise<Result<T, PolicyChangeError>> {
  try {
    return await db.transaction(change);
  } catch (error) {
    if (error instanceof Unsealed) return err(error.refusal);
    throw error;
  }
}

/**
 * Two changes minted at once (two agents' PATCHes, two origins) name the same next capability
 * counter, and the enclave takes one: the other is refused with no detail, and minted again with
 * the next counter. A refusal with a detail (an operator's signature missing or void) is final.
 */
async function racing<T>(seal: () => Promise<SignerResult<T>>): Promise<SignerResult<T>> {
  for (let attempt = 1; ; attempt++) {
    const sealed = await seal();
    if (sealed.ok || sealed.error.code !== "capability_rejected" || sealed.error.detail || attempt === 3) {
      return sealed;
    }
  }
}
