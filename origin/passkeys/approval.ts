/**
 * The console's approval relay (docs/operations.md#passkeys): for a held action, a policy
 * loosening or the unfreezing, the origin builds what the passkey will sign (the shown document,
 * shared/passkey-approval.ts, from the database and the enclave's own state) and its challenge;
 * then it relays the browser's assertion to the enclave, which rebuilds the same bytes itself and
 * verifies them. The origin holds no key for this and cannot make an approval: if it showed one
 * thing and asked for another, the enclave refuses the assertion (`passkey_challenge`).
 */
import { generateAuthenticationOptions } from "@simplewebauthn/server";
import { sql } from "drizzle-orm";
import { type AgentPolicyDocument, agentPolicySchema } from "../../shared/agent-policy.ts";
import { MAX_HELD_APPROVAL_SECONDS } from "../../shared/enclave-ops.ts";
import { type Hex, toHex } from "../../shared/hex.ts";
import type { HeldAction, OperatorApprovedOp, PasskeyApproval } from "../../shared/operator-approval.ts";
import {
  freezeShown,
  heldShown,
  type PasskeyShown,
  passkeyChallenge,
  policyShown,
  toBase64Url,
} from "../../shared/passkey-approval.ts";
import type { ApprovalOptions, ApprovalResult, ApprovalTarget } from "../../shared/passkey-schemas.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { type Db, queryRows, toDate } from "../db/client.ts";
import { changeAgentPolicy, changeNodeFrozen, type PolicyChangeDeps } from "../policy/change.ts";
import type { CapabilityProvider, SignerClient, SignerFailure } from "../signer/types.ts";
import { heldAuthorization } from "../x402/payer/authorize-repository.ts";
import { lowSDer } from "./low-s.ts";
import { findPasskey, recordPasskeyApproval } from "./store.ts";

/** How long the page has to get the assertion and send it back. */
const APPROVAL_SECONDS = 300;

export type ApprovalRelayDeps = {
  db: Db;
  signer: SignerClient;
  /** The origin's admin capability: the enclave's admin tier, which alone only tightens. */
  authorize: CapabilityProvider;
  rpId: string;
  now: () => Date;
};

export type RelayError =
  | { code: "not_found" | "not_held" | "not_enrolled" | "revoked" | "malformed"; message: string }
  | { code: "signer"; failure: SignerFailure };

/** A change resolved against the database and the enclave: what is shown, and how it is applied. */
type Resolved = {
  op: OperatorApprovedOp;
  subject: string;
  shown: PasskeyShown;
  apply(approval: PasskeyApproval, operator: string): Promise<Result<string, RelayError>>;
};

export function createApprovalRelay(deps: ApprovalRelayDeps) {
  const policyDeps: PolicyChangeDeps = {
    db: deps.db,
    signer: deps.signer,
    authorize: deps.authorize,
    // The passkey's approval is always carried, so the origin's own loosening check decides nothing.
    nodePayee: null,
  };

  const passkeyOf = async (
    keyId: string,
  ): Promise<Result<{ operator: string; credentialId: string }, RelayError>> => {
    // The enclave refuses a revoked passkey's approval itself (passkey_revoked); said here first,
    // before anyone is asked to touch their authenticator (docs/operations.md#revoking-a-passkey).
    const registered = await findPasskey(deps.db, keyId);
    if (registered?.keyId === keyId && registered.revokedAt !== null)
      return err({ code: "revoked", message: `passkey ${keyId} was revoked: it approves nothing` });
    const sealed = await deps.signer.getPolicy();
    if (!sealed.ok) return err({ code: "signer", failure: sealed.error });
    const passkey = sealed.value.operatorPasskeys.find((each) => each.keyId === keyId);
    if (!passkey)
      return err({ code: "not_enrolled", message: `no passkey ${keyId} is enrolled in the enclave` });
    return ok({ operator: passkey.operator, credentialId: passkey.credentialId });
  };

  const resolve = async (
    target: ApprovalTarget,
    approvalExpiresAt: number | undefined,
  ): Promise<Result<Resolved, RelayError>> => {
    switch (target.change) {
      case "unfreeze": {
        // The freeze the enclave holds now: the passkey lifts that one, and no freeze put on later.
        const sealed = await deps.signer.getPolicy();
        if (!sealed.ok) return err({ code: "signer", failure: sealed.error });
        const freezeEpoch = sealed.value.nodeFreezeEpoch;
        const shown = freezeShown(false, freezeEpoch);
        return ok({
          op: "set_node_frozen",
          subject: "node",
          shown,
          apply: async (approval, operator) => {
            const changed = await changeNodeFrozen(policyDeps, {
              frozen: false,
              changedBy: { by: "operator", operatorKeyId: approval.keyId },
              operator: { approval, freezeEpoch },
              withinChange: (tx) =>
                recordPasskeyApproval(tx, {
                  keyId: approval.keyId,
                  operator,
                  op: "set_node_frozen",
                  subject: "node",
                  shown,
                }),
            });
            if (!changed.ok) return err(changeError(changed.error));
            return ok("unfrozen");
          },
        });
      }
      case "set_agent_policy":
        return resolvePolicy(target.agent_id, target.policy);
      case "approve_held":
        return resolveHeld(target.action_id, approvalExpiresAt);
    }
  };

  const resolvePolicy = async (agentId: string, policy: unknown): Promise<Result<Resolved, RelayError>> => {
    const [agent] = await queryRows<{ key_ref: string }>(
      deps.db,
      sql`select agent_transfer_key_ref as key_ref from agent_identities where agent_id = ${agentId}`,
    );
    if (!agent) return err({ code: "not_found", message: `no agent ${agentId}` });
    let after: AgentPolicyDocument | null = null;
    if (policy !== null) {
      const parsed = agentPolicySchema.safeParse(policy);
      if (!parsed.success) return err({ code: "malformed", message: "the policy document does not parse" });
      after = parsed.data;
    }
    // The policy before is the enclave's, what it will rebuild the shown document from.
    const sealed = await deps.signer.getAgentPolicy({ keyRef: agent.key_ref });
    if (!sealed.ok) return err({ code: "signer", failure: sealed.error });
    const shown = policyShown(agent.key_ref, sealed.value.policy, after);
    return ok({
      op: "set_agent_policy",
      subject: agentId,
      shown,
      apply: async (approval, operator) => {
        const changed = await changeAgentPolicy(policyDeps, {
          agent: { agentId, keyRef: agent.key_ref },
          next: after,
          changedBy: { by: "operator", operatorKeyId: approval.keyId },
          operator: approval,
          withinChange: (tx) =>
            recordPasskeyApproval(tx, {
              keyId: approval.keyId,
              operator,
              op: "set_agent_policy",
              subject: agentId,
              shown,
            }),
        });
        if (!changed.ok) return err(changeError(changed.error));
        return ok(`version ${changed.value.version}`);
      },
    });
  };

  const resolveHeld = async (
    actionId: string,
    requestedExpiresAt: number | undefined,
  ): Promise<Result<Resolved, RelayError>> => {
    const [row] = await queryRows<{
      kind: string;
      status: string;
      amount_units: string | null;
      to_address: string | null;
      hold_expires_at: Date | string | null;
      signed_payload: unknown;
      key_ref: string;
    }>(
      deps.db,
      sql`select a.kind, a.status, a.amount_units::text as amount_units, a.to_address, a.hold_expires_at,
            a.signed_payload, i.agent_transfer_key_ref as key_ref
          from agent_actions a join agent_identities i on i.agent_id = a.agent_id
          where a.action_id = ${actionId}`,
    );
    if (!row) return err({ code: "not_found", message: `no action ${actionId}` });
    if (row.status !== "held")
      return err({ code: "not_held", message: `action ${actionId} is ${row.status}, not held` });
    const held = heldActionOf(actionId, row);
    if (!held) return err({ code: "malformed", message: `action ${actionId} cannot be approved` });
    const nowSeconds = Math.floor(deps.now().getTime() / 1000);
    const holdEnds =
      row.hold_expires_at === null
        ? Number.POSITIVE_INFINITY
        : Math.floor(toDate(row.hold_expires_at).getTime() / 1000);
    if (holdEnds <= nowSeconds)
      return err({ code: "not_held", message: `action ${actionId}'s hold has ended` });
    // As `npm run policy -- approve`: the approval lasts as long as the hold would have, at most 7 days.
    const expiresAt = requestedExpiresAt ?? Math.min(holdEnds, nowSeconds + MAX_HELD_APPROVAL_SECONDS);
    const shown = heldShown(held, expiresAt);
    return ok({
      op: "approve_held",
      subject: actionId,
      shown,
      apply: async (approval, operator) => {
        // The action approved and its audit in one transaction, written before the enclave seals
        // the approval and rolled back if it does not: an action no longer held, or an audit the
        // database refuses, leaves no approval in the enclave either.
        // The status it has instead when it was no longer held; null once approved here.
        let instead: string | null;
        try {
          instead = await deps.db.transaction(async (tx) => {
            const rows = await queryRows<{ action_id: string }>(
              tx,
              sql`update agent_actions set status = 'approved', updated_at = now()
                  where action_id = ${actionId} and status = 'held' returning action_id`,
            );
            if (rows.length === 0) {
              const [now] = await queryRows<{ status: string }>(
                tx,
                sql`select status from agent_actions where action_id = ${actionId}`,
              );
              return now?.status ?? "gone";
            }
            await recordPasskeyApproval(tx, {
              keyId: approval.keyId,
              operator,
              op: "approve_held",
              subject: actionId,
              shown,
            });
            const sealed = await deps.signer.approveHeld(
              { ...held, expiresAt, operator: approval },
              deps.authorize,
            );
            if (!sealed.ok) throw new ApprovalUnsealed(sealed.error);
            return null;
          });
        } catch (error) {
          if (error instanceof ApprovalUnsealed) return err({ code: "signer", failure: error.failure });
          throw error;
        }
        if (instead !== null) {
          // Named, as `npm run policy -- approve` names it: `approved` (another operator's approval
          // came first, and it is signed once) is not `rejected` or `expired` (never signed).
          return err({
            code: "not_held",
            message: `action ${actionId} became ${instead} meanwhile (another operator's approval or rejection, or its hold's end, came first): this approval was not used`,
          });
        }
        return ok("approved");
      },
    });
  };

  return {
    /** The shown document, its challenge and the WebAuthn options for `keyId`'s passkey. */
    async options(target: ApprovalTarget, keyId: string): Promise<Result<ApprovalOptions, RelayError>> {
      const passkey = await passkeyOf(keyId);
      if (!passkey.ok) return passkey;
      const resolved = await resolve(target, undefined);
      if (!resolved.ok) return resolved;
      const identity = await deps.signer.getSealedIdentity();
      if (!identity.ok) return err({ code: "signer", failure: identity.error });
      // The time in milliseconds, as the operator tools use: it only has to grow.
      const counter = deps.now().getTime();
      const expiresAt = Math.floor(counter / 1000) + APPROVAL_SECONDS;
      const challenge = passkeyChallenge({
        envId: identity.value.envId,
        chainId: identity.value.chainId,
        instanceId: identity.value.instanceId,
        keyId,
        counter,
        expiresAt,
        shown: resolved.value.shown,
      });
      const options = await generateAuthenticationOptions({
        rpID: deps.rpId,
        challenge: Uint8Array.from(challenge),
        allowCredentials: [{ id: passkey.value.credentialId }],
        userVerification: "required",
        timeout: APPROVAL_SECONDS * 1000,
      });
      return ok({
        key_id: keyId,
        operator: passkey.value.operator,
        counter,
        expires_at: expiresAt,
        shown: resolved.value.shown as unknown as Record<string, unknown>,
        challenge: toBase64Url(challenge),
        options: options as unknown as Record<string, unknown>,
      });
    },

    /** Relays the assertion to the enclave with the change; records who approved it. */
    async relay(request: {
      target: ApprovalTarget;
      keyId: string;
      counter: number;
      expiresAt: number;
      approvalExpiresAt?: number | undefined;
      response: Record<string, unknown>;
    }): Promise<Result<ApprovalResult, RelayError>> {
      const passkey = await passkeyOf(request.keyId);
      if (!passkey.ok) return passkey;
      const assertion = assertionOf(request.response);
      if (!assertion)
        return err({ code: "malformed", message: "response is not an AuthenticationResponseJSON" });
      const resolved = await resolve(request.target, request.approvalExpiresAt);
      if (!resolved.ok) return resolved;
      const approval: PasskeyApproval = {
        keyId: request.keyId,
        counter: request.counter,
        expiresAt: request.expiresAt,
        webauthn: assertion,
      };
      const applied = await resolved.value.apply(approval, passkey.value.operator);
      if (!applied.ok) return applied;
      return ok({
        change: request.target.change,
        operator: passkey.value.operator,
        key_id: request.keyId,
        subject: resolved.value.subject,
        outcome: applied.value,
      });
    },
  };
}

export type ApprovalRelay = ReturnType<typeof createApprovalRelay>;

/** The enclave refused (or did not answer) an approval already written in its transaction. */
class ApprovalUnsealed extends Error {
  constructor(readonly failure: SignerFailure) {
    super("the enclave did not seal the approval");
  }
}

function heldActionOf(
  actionId: string,
  row: {
    kind: string;
    amount_units: string | null;
    to_address: string | null;
    signed_payload: unknown;
    key_ref: string;
  },
): Omit<HeldAction, "instanceId"> | null {
  if (row.kind === "transfer") {
    if (row.to_address === null || row.amount_units === null) return null;
    return {
      keyRef: row.key_ref,
      kind: "transfer",
      ref: actionId,
      to: row.to_address,
      valueUnits: BigInt(row.amount_units),
    };
  }
  if (row.kind === "x402") {
    const held = heldAuthorization(row.signed_payload);
    if (!held) return null;
    return {
      keyRef: row.key_ref,
      kind: "x402",
      ref: held.nonce,
      to: held.payTo,
      valueUnits: BigInt(held.amountUnits),
    };
  }
  return null;
}

/** The assertion's parts in 0x-hex, its signature in the low-S form the enclave takes. */
function assertionOf(response: Record<string, unknown>): PasskeyApproval["webauthn"] | null {
  const inner = response.response;
  if (typeof inner !== "object" || inner === null) return null;
  const { authenticatorData, clientDataJSON, signature } = inner as Record<string, unknown>;
  if (
    typeof authenticatorData !== "string" ||
    typeof clientDataJSON !== "string" ||
    typeof signature !== "string"
  ) {
    return null;
  }
  const bytes = (value: string): Hex => toHex(Buffer.from(value, "base64url"));
  const der = lowSDer(Buffer.from(signature, "base64url"));
  if (der === null) return null;
  return {
    authenticatorData: bytes(authenticatorData),
    clientDataJson: bytes(clientDataJSON),
    signature: toHex(der),
  };
}

function changeError(
  error:
    | { code: "loosening_requires_operator"; fields: string[] }
    | { code: "signer"; failure: SignerFailure },
): RelayError {
  return error.code === "signer"
    ? error
    : { code: "malformed", message: `the change loosens ${error.fields.join(", ")} and carries no approval` };
}
