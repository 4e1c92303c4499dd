/**
 * The held actions `npm run policy` reads and decides (docs/operations.md#agent-spending-policies-npm-run-policy): an agent's key, its
 * held actions, one action of its, and the one move an operator makes, `held` to `approved` or
 * `rejected`, only while the action is still `held` (the hold's sweep or another operator may
 * have ended it meanwhile).
 */
import { sql } from "drizzle-orm";
import { type Db, queryRows, toDate } from "../../origin/db/client.ts";
import { heldAuthorization } from "../../origin/x402/payer/authorize-repository.ts";
import type { HeldAction } from "../../shared/operator-approval.ts";
import { err, ok, type Result } from "../../shared/result.ts";

/** The agent's transfer key (what its policy is sealed under), or null for no such agent. */
export async function agentKeyRef(db: Db, agentId: string): Promise<string | null> {
  const [row] = await queryRows<{ key_ref: string }>(
    db,
    sql`select agent_transfer_key_ref as key_ref from agent_identities where agent_id = ${agentId}`,
  );
  return row?.key_ref ?? null;
}

/** The node's freeze as the database stores it (node_policy). */
export async function storedNodeFrozen(db: Db): Promise<boolean> {
  const [row] = await queryRows<{ frozen: boolean }>(db, sql`select frozen from node_policy where id = 1`);
  return row?.frozen ?? false;
}

export type HeldActionRow = {
  actionId: string;
  kind: string;
  status: string;
  amountUnits: string | null;
  to: string | null;
  rule: string | null;
  expiresAt: Date | null;
  signedPayload: unknown;
};

type Row = {
  action_id: string;
  kind: string;
  status: string;
  amount_units: string | null;
  to_address: string | null;
  hold_rule: string | null;
  hold_expires_at: Date | string | null;
  signed_payload: unknown;
};

const columns = sql`action_id, kind, status, amount_units::text as amount_units, to_address, hold_rule,
  hold_expires_at, signed_payload`;

function fromRow(row: Row): HeldActionRow {
  return {
    actionId: row.action_id,
    kind: row.kind,
    status: row.status,
    amountUnits: row.amount_units,
    to: row.to_address,
    rule: row.hold_rule,
    expiresAt: row.hold_expires_at === null ? null : toDate(row.hold_expires_at),
    signedPayload: row.signed_payload,
  };
}

/** The agent's actions waiting for an operator, the first to expire first. */
export async function heldActionsOf(db: Db, agentId: string): Promise<HeldActionRow[]> {
  const rows = await queryRows<Row>(
    db,
    sql`select ${columns} from agent_actions where agent_id = ${agentId} and status = 'held'
        order by hold_expires_at, created_at`,
  );
  return rows.map(fromRow);
}

/** One action of the agent's (another agent's action is not found, as an unknown one). */
export async function actionOf(db: Db, agentId: string, actionId: string): Promise<HeldActionRow | null> {
  const [row] = await queryRows<Row>(
    db,
    sql`select ${columns} from agent_actions where agent_id = ${agentId} and action_id = ${actionId}`,
  );
  return row ? fromRow(row) : null;
}

/**
 * What the operator's approval names (heldActionSubject without the instance): a transfer by its
 * action id, recipient and amount; an x402 authorization by the nonce, payTo and amount of the
 * authorization the held action stores. An error names what the row lacks.
 */
export function heldSubjectOf(
  action: HeldActionRow,
  keyRef: string,
): Result<Omit<HeldAction, "instanceId">, string> {
  if (action.kind === "transfer") {
    if (action.to === null || action.amountUnits === null)
      return err("the transfer has no recipient or amount");
    return ok({
      keyRef,
      kind: "transfer",
      ref: action.actionId,
      to: action.to,
      valueUnits: BigInt(action.amountUnits),
    });
  }
  if (action.kind === "x402") {
    const held = heldAuthorization(action.signedPayload);
    if (!held) return err("the x402 action stores no held authorization");
    return ok({
      keyRef,
      kind: "x402",
      ref: held.nonce,
      to: held.payTo,
      valueUnits: BigInt(held.amountUnits),
    });
  }
  return err(`a ${action.kind} action is never held`);
}

/**
 * Moves the action from `held` to `status`; the status it has instead when it was no longer held
 * (nothing changed then).
 */
export async function decideHeld(
  db: Db,
  actionId: string,
  status: "approved" | "rejected",
): Promise<Result<void, { status: string }>> {
  const decided = await queryRows<{ action_id: string }>(
    db,
    sql`update agent_actions set status = ${status}, updated_at = now()
        where action_id = ${actionId} and status = 'held' returning action_id`,
  );
  if (decided.length > 0) return ok(undefined);
  const [row] = await queryRows<{ status: string }>(
    db,
    sql`select status from agent_actions where action_id = ${actionId}`,
  );
  return err({ status: row?.status ?? "gone" });
}

/**
 * Approves a held action: moved to `approved` first, in a transaction that `seal` (the enclave's
 * approve_held) runs inside and whose refusal rolls it back. An action no longer held is never
 * sealed, so another operator's rejection meanwhile leaves no approval in the enclave; an
 * approval the enclave refuses leaves the action held.
 */
export async function approveHeldAction<E>(
  db: Db,
  actionId: string,
  seal: () => Promise<Result<unknown, E>>,
): Promise<Result<void, { status: string } | { unsealed: E }>> {
  try {
    return await db.transaction(async (tx) => {
      const decided = await decideHeld(tx, actionId, "approved");
      if (!decided.ok) return decided;
      const sealed = await seal();
      if (!sealed.ok) throw new Unsealed(sealed.error);
      return decided;
    });
  } catch (error) {
    if (error instanceof Unsealed) return err({ unsealed: error.refusal as E });
    throw error;
  }
}

/** The enclave refused the approval of an action already moved to `approved` in its transaction. */
class Unsealed extends Error {
  constructor(readonly refusal: unknown) {
    super("the enclave did not seal the approval");
  }
}
