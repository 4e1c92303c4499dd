import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { newAccount } from "../../devnet/testing.ts";
import { enrollPendingPasskey } from "../../ops/lib/passkey-enroll.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import type { ApprovalOptions, PasskeyView } from "../../shared/passkey-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import { consoleCalls, consoleSecrets } from "../../testing/console-client.ts";
import { send } from "../../testing/http.ts";
import { backendPid, waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import { signTransferOverSocket } from "../../testing/socket-transfer.ts";
import { type Assertion, SoftwarePasskey } from "../../testing/software-passkey.ts";
import { useMoneyStack, useStackOrigin } from "../../testing/stack.ts";
import { type Db, queryRows } from "../db/client.ts";

// Issue 43, passkeys through the console (real stack: origin, enclave, devnet, Postgres): an
// operator registers a passkey (verified by @simplewebauthn/server), the policy authority's holder
// enrolls it, and its assertion, relayed by the origin, approves a held transfer that is then signed
// and confirmed once. The origin alone can neither enroll a passkey nor change what it approved.

const RP_ID = "localhost";
const REFUSE_AUDIT = "refuse_passkey_audit_in_test";
const ORIGIN = "http://localhost:8080";

/**
 * Runs `run` while Postgres refuses every passkey audit row (a real refusal, by a trigger of this
 * test's own), then takes the trigger away.
 */
async function whileAuditRefused(db: Db, run: () => Promise<void>): Promise<void> {
  await db.execute(
    sql.raw(`create function ${REFUSE_AUDIT}() returns trigger language plpgsql as
      $$ begin raise exception 'the audit row is refused by the test'; end $$`),
  );
  await db.execute(
    sql.raw(`create trigger ${REFUSE_AUDIT} before insert on passkey_approvals
      for each row execute function ${REFUSE_AUDIT}()`),
  );
  try {
    await run();
  } finally {
    await db.execute(sql.raw(`drop trigger ${REFUSE_AUDIT} on passkey_approvals`));
    await db.execute(sql.raw(`drop function ${REFUSE_AUDIT}()`));
  }
}

/** An assertion as startAuthentication returns it (AuthenticationResponseJSON). */
function authenticationResponse(passkey: SoftwarePasskey, assertion: Assertion): Record<string, unknown> {
  const b64 = (hex: string) => Buffer.from(hex.slice(2), "hex").toString("base64url");
  return {
    id: passkey.credentialId,
    rawId: passkey.credentialId,
    type: "public-key",
    response: {
      authenticatorData: b64(assertion.authenticatorData),
      clientDataJSON: b64(assertion.clientDataJson),
      signature: b64(assertion.signature),
    },
    clientExtensionResults: {},
  };
}

describe("passkeys through the console (real stack)", () => {
  const stack = useMoneyStack();
  const secrets = consoleSecrets();
  const origin = useStackOrigin("console with passkeys", stack, () => ({
    env: { ...secrets.env, CONSOLE_RP_ID: RP_ID, CONSOLE_ORIGIN: ORIGIN },
  }));
  const console_ = () =>
    consoleCalls(origin.base, { admin: secrets.adminToken, change: secrets.changeToken });
  const alice = new SoftwarePasskey(RP_ID, ORIGIN);
  let registered: PasskeyView;

  /** A funded agent whose policy holds a transfer above 2 USDC, and its held transfer of 3 USDC. */
  const heldTransfer = async () => {
    const agent = await stack.newAgent({ units: 20_000_000n });
    const patched = await send(`${stack.origin.base}/agent/v1/policy`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${agent.token}` },
      body: JSON.stringify({ approval_above_units: "2000000" }),
    });
    expect(patched.status).toBe(200);
    const transfers = agentCalls(stack.origin.base, agent.token);
    const to = newAccount().address;
    const held = await transfers.transfer({ idempotency_key: newKey(), to, amount: "3000000" });
    expect(held.status).toBe(202);
    const actionId = (held.body as ActionView).action_id;
    return { agent, transfers, to, actionId, target: { change: "approve_held", action_id: actionId } };
  };
  /** The transactions the agent's wallet has sent. */
  const sentFrom = async (agent: { wallet: string }): Promise<number> =>
    (
      await queryRows<{ n: number }>(
        stack.db.handle.db,
        sql`select count(*)::int as n from outgoing_transactions where sender = ${agent.wallet.toLowerCase()}`,
      )
    )[0]!.n;
  /** Alice's approval of `target` as the page relays it: its options asked, then her assertion. */
  const aliceApproval = async (target: Record<string, string>) => {
    const prepared = await console_().post("/approvals/options", { target, key_id: registered.key_id });
    expect(prepared.status).toBe(200);
    const options = prepared.body as ApprovalOptions;
    return {
      target,
      key_id: registered.key_id,
      counter: options.counter,
      expires_at: options.expires_at,
      approval_expires_at: options.shown.approval_expires_at as number,
      response: authenticationResponse(alice, alice.assert(Buffer.from(options.challenge, "base64url"))),
    };
  };

  it("registers a passkey through the ceremony: pending, no power; the same response again is refused", async () => {
    const options = await console_().post("/passkeys/registration/options", { operator: "Alice Martin" });
    expect(options.status).toBe(200);
    const creation = (options.body as { options: { challenge: string; rp: { id: string } } }).options;
    expect(creation.rp.id).toBe(RP_ID);
    const response = alice.registrationResponse(creation.challenge);
    const done = await console_().post("/passkeys/registration", { operator: "Alice Martin", response });
    expect(done.status).toBe(201);
    registered = done.body as PasskeyView;
    expect(registered).toMatchObject({
      operator: "Alice Martin",
      credential_id: alice.credentialId,
      public_key: alice.publicKey,
      rp_id: RP_ID,
      origin: ORIGIN,
      enrolled: false,
    });
    const [row] = await queryRows<{ enrolled_at: Date | null }>(
      stack.db.handle.db,
      sql`select enrolled_at from operator_passkeys where credential_id = ${alice.credentialId}`,
    );
    expect(row).toEqual({ enrolled_at: null });
    // Listed, pending, under the read token alone; without it, nothing.
    const listed = await consoleCalls(origin.base, { admin: secrets.adminToken }).get("/passkeys");
    expect(listed.status).toBe(200);
    expect(listed.body).toEqual({ passkeys: [registered] });
    expect((await consoleCalls(origin.base, {}).get("/passkeys")).status).toBe(401);
    // Its challenge is spent.
    const again = await console_().post("/passkeys/registration", { operator: "Alice Martin", response });
    expect(again.status).toBe(400);
    // Registered is not enrolled: the enclave knows no such passkey.
    const early = await console_().post("/approvals/options", {
      target: { change: "unfreeze" },
      key_id: registered.key_id,
    });
    expect(early.status).toBe(404);
    // A target of no known change: the discriminator named with the values it takes (a union's
    // description in json-body.ts read it as "must hold exactly one of", naming nothing).
    const unknown = await console_().post("/approvals/options", {
      target: { change: "thaw" },
      key_id: registered.key_id,
    });
    expect({ status: unknown.status, body: unknown.body }).toMatchObject({
      status: 400,
      body: {
        error: {
          code: "validation_failed",
          message:
            "target.change: Invalid discriminator value. Expected 'approve_held' | 'set_agent_policy' | 'unfreeze'",
        },
      },
    });
  });

  it("the origin's admin key cannot enroll it; the policy authority's holder does (enroll-passkey)", async () => {
    const params = {
      keyId: registered.key_id,
      operator: "Alice Martin",
      credentialId: alice.credentialId,
      publicKey: alice.publicKey,
      rpId: RP_ID,
      origin: ORIGIN,
    };
    const byOrigin = await stack.signer.enrollOperatorPasskey(params, stack.authorities.admin);
    expect(byOrigin.ok ? "enrolled" : byOrigin.error.code).toBe("capability_rejected");
    const announced: string[] = [];
    const enrolled = await enrollPendingPasskey({
      db: stack.db.handle.db,
      client: stack.signer,
      policySecret: stack.enclave.policySecret,
      id: alice.credentialId,
      announce: (passkey) => announced.push(`${passkey.operator} ${passkey.rpId} ${passkey.origin}`),
    });
    expect(enrolled.ok).toBe(true);
    expect(announced).toEqual([`Alice Martin ${RP_ID} ${ORIGIN}`]);
    const sealed = await stack.signer.getPolicy();
    if (!sealed.ok) throw new Error("get_policy");
    expect(sealed.value.operatorPasskeys).toContainEqual({ ...params, label: null });
    const listed = await console_().get("/passkeys");
    expect(listed.body).toEqual({ passkeys: [{ ...registered, enrolled: true }] });
  });

  it("unfreezing a node that is not frozen records what it found: the audit's before is not frozen", async () => {
    const db = stack.db.handle.db;
    const [node] = await queryRows<{ frozen: boolean }>(db, sql`select frozen from node_policy where id = 1`);
    expect(node).toEqual({ frozen: false });
    const target = { change: "unfreeze" };
    const prepared = await console_().post("/approvals/options", { target, key_id: registered.key_id });
    expect(prepared.status).toBe(200);
    const options = prepared.body as ApprovalOptions;
    // The passkey is shown the freeze it lifts: the one the enclave holds now, and no later one.
    const sealed = await stack.signer.getPolicy();
    expect(sealed.ok && options.shown).toEqual({
      op: "set_node_frozen",
      frozen: false,
      freeze_epoch: sealed.ok ? sealed.value.nodeFreezeEpoch : null,
    });
    const unfrozen = await console_().post("/approvals", {
      target,
      key_id: registered.key_id,
      counter: options.counter,
      expires_at: options.expires_at,
      response: authenticationResponse(alice, alice.assert(Buffer.from(options.challenge, "base64url"))),
    });
    expect(unfrozen.status, JSON.stringify(unfrozen.body)).toBe(200);
    const [recorded] = await queryRows<{ before: unknown; after: unknown; changed_by: string }>(
      db,
      sql`select before, after, changed_by from policy_changes where agent_id is null
          order by change_id desc limit 1`,
    );
    expect(recorded).toEqual({ before: { frozen: false }, after: { frozen: false }, changed_by: "operator" });
  });

  it("approves a held transfer: the page is shown payee and amount, the assertion (high-S, as authenticators may sign) is relayed, and the transfer is signed and confirmed once; the audit names the operator and passkey", async () => {
    const { agent, transfers, to, actionId, target } = await heldTransfer();

    const prepared = await console_().post("/approvals/options", { target, key_id: registered.key_id });
    expect(prepared.status).toBe(200);
    const options = prepared.body as ApprovalOptions;
    expect(options.shown).toMatchObject({
      op: "approve_held",
      kind: "transfer",
      ref: actionId,
      to: to.toLowerCase(),
      value_units: "3000000",
    });
    expect(options.operator).toBe("Alice Martin");
    const assertion = alice.assert(Buffer.from(options.challenge, "base64url"), { s: "high" });
    const approval = {
      target,
      key_id: registered.key_id,
      counter: options.counter,
      expires_at: options.expires_at,
      approval_expires_at: options.shown.approval_expires_at as number,
      response: authenticationResponse(alice, assertion),
    };
    // The origin asking for a longer approval than the operator was shown: the enclave refuses.
    const longer = await console_().post("/approvals", {
      ...approval,
      approval_expires_at: approval.approval_expires_at + 60,
    });
    expect(longer.status).toBe(403);
    expect(longer.body).toMatchObject({
      error: { code: "policy_loosening_requires_operator", detail: "passkey_challenge" },
    });

    const approved = await console_().post("/approvals", approval);
    expect(approved.status).toBe(200);
    expect(approved.body).toEqual({
      change: "approve_held",
      operator: "Alice Martin",
      key_id: registered.key_id,
      subject: actionId,
      outcome: "approved",
    });
    const done = await transfers.settled(actionId);
    expect(done).toMatchObject({ status: "confirmed" });
    expect(await sentFrom(agent)).toBe(1);
    // The same approval again: the action is no longer held.
    expect((await console_().post("/approvals", approval)).status).toBe(409);

    const audit = await console_().get("/audit");
    const changes = (audit.body as { changes: Array<Record<string, unknown>> }).changes;
    expect(changes).toContainEqual(
      expect.objectContaining({
        kind: "passkey_approval",
        subject: actionId,
        change: "approve_held",
        reason: `approved by Alice Martin with passkey ${registered.key_id}`,
      }),
    );
  });

  it("the approval and its audit row are one transaction: an audit row the database refuses leaves the transfer held and unsigned, and a new approval then signs it once", async () => {
    const db = stack.db.handle.db;
    const { agent, transfers, actionId, target } = await heldTransfer();
    const approve = async () => console_().post("/approvals", await aliceApproval(target));
    const audited = async () =>
      (
        await queryRows<{ n: number }>(
          db,
          sql`select count(*)::int as n from passkey_approvals where subject = ${actionId}`,
        )
      )[0]!.n;
    await whileAuditRefused(db, async () => {
      expect((await approve()).status).toBe(500);
    });
    // No change without its audit: still held, nothing signed, no audit row.
    expect(((await transfers.action(actionId)).body as ActionView).status).toBe("held");
    expect(await audited()).toBe(0);
    expect(await sentFrom(agent)).toBe(0);

    const approved = await approve();
    expect(approved.status).toBe(200);
    expect(await transfers.settled(actionId)).toMatchObject({ status: "confirmed" });
    expect(await sentFrom(agent)).toBe(1);
    expect(await audited()).toBe(1);
  });

  it("two approvals of one held transfer relayed at once: one approves it, the other is refused naming the action approved (not that nothing is signed), and the transfer is signed once", async () => {
    const db = stack.db.handle.db;
    const { agent, transfers, actionId, target } = await heldTransfer();
    // Two operators' pages (here one passkey's two assertions, each with its own counter), both
    // prepared while the action is held.
    const prepare = () => aliceApproval(target);
    const first = await prepare();
    await sleep(5);
    const second = await prepare();
    // Both relays read the action held and meet at its row, held here until both wait there.
    const answers = await db.transaction(async (tx) => {
      await tx.execute(sql`select 1 from agent_actions where action_id = ${actionId} for update`);
      const relayed = [first, second].map((approval) => console_().post("/approvals", approval));
      await waitUntilBlockedBy(db, {
        holder: await backendPid(tx),
        statement: "update agent_actions set status = 'approved'",
        what: "both approvals wait at the held action's row",
        count: 2,
        timeoutMs: 10_000,
      });
      return relayed;
    });
    const [a, b] = await Promise.all(answers);
    const statuses = [a!.status, b!.status].sort();
    expect(statuses).toEqual([200, 409]);
    const refused = (a!.status === 409 ? a! : b!).body as { error: { code: string; message: string } };
    expect(refused.error.code).toBe("idempotency_conflict");
    expect(refused.error.message).toContain("approved");
    expect(refused.error.message).not.toContain("nothing is signed");
    expect(await transfers.settled(actionId)).toMatchObject({ status: "confirmed" });
    expect(await sentFrom(agent)).toBe(1);
  });

  it("a policy loosening and its audit row are one change: an audit row the database refuses leaves the enclave's policy as it was, not loosened unseen; a new approval then loosens it", async () => {
    const db = stack.db.handle.db;
    const agent = await stack.newAgent();
    const patched = await send(`${stack.origin.base}/agent/v1/policy`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${agent.token}` },
      body: JSON.stringify({ transfers: { daily_units: "1000000" } }),
    });
    expect(patched.status).toBe(200);
    const target = {
      change: "set_agent_policy",
      agent_id: agent.agentId,
      policy: { transfers: { daily_units: "2000000" } },
    };
    const approve = async () => {
      const prepared = await console_().post("/approvals/options", { target, key_id: registered.key_id });
      expect(prepared.status).toBe(200);
      const options = prepared.body as ApprovalOptions;
      return console_().post("/approvals", {
        target,
        key_id: registered.key_id,
        counter: options.counter,
        expires_at: options.expires_at,
        response: authenticationResponse(alice, alice.assert(Buffer.from(options.challenge, "base64url"))),
      });
    };
    const sealed = async () => {
      const held = await stack.signer.getAgentPolicy({ keyRef: agent.keyRef });
      if (!held.ok) throw new Error(`get_agent_policy: ${held.error.code}`);
      return { policy: held.value.policy, version: held.value.version };
    };
    const stored = async () =>
      (
        await queryRows<{ policy: unknown; version: number }>(
          db,
          sql`select policy, version from agent_policies where agent_id = ${agent.agentId}`,
        )
      )[0];
    const audited = async () =>
      (
        await queryRows<{ n: number }>(
          db,
          sql`select count(*)::int as n from passkey_approvals where subject = ${agent.agentId}`,
        )
      )[0]!.n;

    await whileAuditRefused(db, async () => {
      expect((await approve()).status).toBe(500);
    });
    // No change without its audit, in the enclave either: what it enforces is what the console shows.
    const before = { transfers: { daily_units: "1000000" } };
    expect(await sealed()).toEqual({ policy: before, version: 1 });
    expect(await stored()).toEqual({ policy: before, version: 1 });
    expect(await audited()).toBe(0);

    const approved = await approve();
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    const after = { transfers: { daily_units: "2000000" } };
    expect(await sealed()).toEqual({ policy: after, version: 2 });
    expect(await stored()).toEqual({ policy: after, version: 2 });
    expect(await audited()).toBe(1);
  });

  it("an approval of a held transfer whose audit row the database refuses is not sealed either: the enclave, asked straight over its socket, will not sign the transfer", async () => {
    const db = stack.db.handle.db;
    const { agent, to, actionId, target } = await heldTransfer();
    const prepared = await console_().post("/approvals/options", { target, key_id: registered.key_id });
    expect(prepared.status).toBe(200);
    const options = prepared.body as ApprovalOptions;

    await whileAuditRefused(db, async () => {
      const refused = await console_().post("/approvals", {
        target,
        key_id: registered.key_id,
        counter: options.counter,
        expires_at: options.expires_at,
        approval_expires_at: options.shown.approval_expires_at as number,
        response: authenticationResponse(alice, alice.assert(Buffer.from(options.challenge, "base64url"))),
      });
      expect(refused.status).toBe(500);
    });
    // What a compromised origin would do with an approval the audit never recorded.
    const signed = await signTransferOverSocket(stack.signer, agent, {
      to,
      valueUnits: 3_000_000n,
      actionId,
      nonce: 1_000n,
    });
    expect(signed.ok ? "signed" : signed.error.detail).toBe("policy_held");
  });
});
