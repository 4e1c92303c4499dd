import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { newAccount } from "../../devnet/testing.ts";
import {
  generateOperatorKey,
  type OperatorKey,
  operatorCounterNow,
  readOperatorKey,
  signOperatorApproval,
} from "../../ops/lib/operator-key.ts";
import { CHAIN_ID } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { agentPolicySubject } from "../../shared/operator-approval.ts";
import type { PolicyCheckResponse, PolicyResponse } from "../../shared/policy-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import { sealHeldApproval as sealApproval } from "../../testing/held-approval.ts";
import { send } from "../../testing/http.ts";
import { backendPid, waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import { signTransferOverSocket } from "../../testing/socket-transfer.ts";
import { useMoneyStack, useStackOrigin } from "../../testing/stack.ts";
import { afterWholeSweeps, afterWholeTicks } from "../../testing/worker-ticks.ts";
import { queryRows } from "../db/client.ts";
import { revokeIdentity, setIdentityEnabled } from "../identity/identity-admin.ts";
import { changeAgentPolicy } from "./change.ts";

// An agent's spending policy through the gateway of a real stack (origin, enclave, devnet,
// Postgres): what the agent reads, what its requests meet, and that the enclave holds the same.

/** Adjacent concurrent blocks run at once; each block's tests run as it marks them. */
const BESIDE = { concurrent: true } as const;

describe("an agent's spending policy through the gateway (real stack)", () => {
  // The node's own limits: 10 USDC a transfer, 50 a day (the stack's sealed policy).
  const stack = useMoneyStack();
  const shortHolds = useStackOrigin("short holds", stack, () => ({
    env: { AGENT_POLICY_HOLD_SECONDS: "2" },
  }));
  // The database ends a hold (the tracker's sweep, agent-actions/holds.ts), so it is the one to
  // stamp its end: the origin's clock here reads five minutes behind it (the test's clock, the one
  // thing faked).
  const behindHolds = useStackOrigin("holds on a clock five minutes behind the database's", stack, () => ({
    env: { AGENT_POLICY_HOLD_SECONDS: "300" },
    clock: { now: () => new Date(Date.now() - 5 * 60_000) },
  }));
  /** The origins on the stack, each running the approved-transfer loop. */
  const everyOrigin = () => [stack.origin, shortHolds, behindHolds];
  let operator: { key: OperatorKey; keyId: string };

  beforeAll(async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "operator-"));
    const file = path.join(dir, "operator.key");
    const { publicKey } = await generateOperatorKey(file);
    const keyId = "test-operator";
    const enrolled = await stack.signer.enrollOperatorKey({ keyId, publicKey }, stack.authorities.policy);
    if (!enrolled.ok) throw new Error(`enroll: ${enrolled.error.code}`);
    operator = { key: await readOperatorKey(file), keyId };
  });

  const policyCalls = (agent: StackAgent, base = stack.origin.base) => {
    const headers = { authorization: `Bearer ${agent.token}` };
    return {
      get: async () => (await send(`${base}/agent/v1/policy`, { headers })).body as PolicyResponse,
      patch: (body: unknown) =>
        send(`${base}/agent/v1/policy`, { method: "PATCH", headers, body: JSON.stringify(body) }),
      check: async (body: unknown) => {
        const response = await send(`${base}/agent/v1/policy/check`, {
          method: "POST",
          headers,
          body: JSON.stringify(body),
        });
        expect(response.status).toBe(200);
        return response.body as PolicyCheckResponse;
      },
    };
  };
  const outgoing = async (agent: StackAgent): Promise<number> => {
    const [row] = await queryRows<{ n: number }>(
      stack.db.handle.db,
      sql`select count(*)::int as n from outgoing_transactions where sender = ${agent.wallet.toLowerCase()}`,
    );
    return row!.n;
  };
  const sealHeldApproval = (agent: StackAgent, held: Parameters<typeof sealApproval>[3]) =>
    sealApproval(stack, operator, agent, held);
  const sealedVersion = async (agent: StackAgent): Promise<number | null> => {
    const sealed = await stack.signer.getAgentPolicy({ keyRef: agent.keyRef });
    if (!sealed.ok) throw new Error(`get_agent_policy: ${sealed.error.code}`);
    return sealed.value.policy === null ? null : sealed.value.version;
  };

  /**
   * A transfer of a new agent held by its policy, `bar` run on the agent, then approved as `npm run
   * policy -- approve` does (until the hold would have ended): waits until the hold's end has passed
   * and checks it ended `expired`, never signed meanwhile.
   */
  const approvedOnceBarred = async (
    bar: (agent: StackAgent) => Promise<void>,
  ): Promise<{ agent: StackAgent; view: ActionView }> => {
    const db = stack.db.handle.db;
    const agent = await stack.newAgent({ units: 20_000_000n });
    expect(
      (await policyCalls(agent, shortHolds.base).patch({ approval_above_units: "2000000" })).status,
    ).toBe(200);
    const to = newAccount().address;
    const held = await agentCalls(shortHolds.base, agent.token).transfer({
      idempotency_key: newKey(),
      to,
      amount: "3000000",
    });
    const view = held.body as ActionView;
    expect(view.status).toBe("held");
    await bar(agent);
    const sealed = await sealHeldApproval(agent, {
      actionId: view.action_id,
      to,
      valueUnits: 3_000_000n,
      expiresAt: Math.floor(Date.parse(view.expires_at!) / 1000),
    });
    expect(sealed.ok).toBe(true);
    const marked = await queryRows<{ action_id: string }>(
      db,
      sql`update agent_actions set status = 'approved', updated_at = now()
          where action_id = ${view.action_id} and status = 'held' returning action_id`,
    );
    expect(marked).toHaveLength(1);

    const status = async () =>
      (
        await queryRows<{ status: string }>(
          db,
          sql`select status from agent_actions where action_id = ${view.action_id}`,
        )
      )[0]!.status;
    const deadline = Date.now() + 20_000;
    while ((await status()) === "approved" && Date.now() < deadline) await sleep(250);
    expect(await status()).toBe("expired");
    return { agent, view };
  };

  /** The action's status and, once it failed, its code and the refusal's reason. */
  const actionState = async (actionId: string) =>
    (
      await queryRows<{ status: string; error_code: string | null; reason: string | null }>(
        stack.db.handle.db,
        // The refusal's fields are stored as [name, value] pairs (agent-actions/refusal-fields.ts).
        sql`select status, error_code,
              (select f->>1 from jsonb_array_elements(error_fields) f where f->>0 = 'reason') as reason
            from agent_actions where action_id = ${actionId}`,
      )
    )[0]!;

  /**
   * A transfer of `agent` held and approved by an operator, which the origins' workers read while
   * its identity stands; their batch waits at the sender's nonce row, held here while `meanwhile`
   * runs, and reads the sender's gate once it is let go. With `holdEndsAt` (unix seconds), the
   * hold ends then and the approval lasts until then, as `npm run policy -- approve` seals it.
   */
  const approvedWhileSenderHeld = async (
    agent: StackAgent,
    meanwhile: () => Promise<void>,
    holdEndsAt?: number,
  ): Promise<ActionView> => {
    const db = stack.db.handle.db;
    expect((await policyCalls(agent).patch({ approval_above_units: "2000000" })).status).toBe(200);
    const to = newAccount().address;
    const held = await agentCalls(stack.origin.base, agent.token).transfer({
      idempotency_key: newKey(),
      to,
      amount: "3000000",
    });
    const view = held.body as ActionView;
    expect(view.status).toBe("held");
    const sealed = await sealHeldApproval(agent, {
      actionId: view.action_id,
      to,
      valueUnits: 3_000_000n,
      expiresAt: holdEndsAt ?? Math.floor(Date.now() / 1000) + 3600,
    });
    expect(sealed.ok).toBe(true);
    if (holdEndsAt !== undefined) {
      await db.execute(
        sql`update agent_actions set hold_expires_at = to_timestamp(${holdEndsAt}) where action_id = ${view.action_id}`,
      );
    }
    const sender = agent.wallet.toLowerCase();
    await db.execute(
      sql`insert into sender_nonces (address, next_nonce) values (${sender}, 0) on conflict do nothing`,
    );
    await db.transaction(async (tx) => {
      await tx.execute(sql`select 1 from sender_nonces where address = ${sender} for update`);
      await db.execute(
        sql`update agent_actions set status = 'approved', updated_at = now() where action_id = ${view.action_id}`,
      );
      // The origins' workers (one each, every second) read it and one's batch waits at the lock
      // (outbox/submit.ts lockStatement): a lock wait of anything else does not count.
      await waitUntilBlockedBy(db, {
        holder: await backendPid(tx),
        statement: "insert into sender_nonces",
        what: "the approved transfer's batch waits at the sender's nonce row",
        timeoutMs: 5_000,
      });
      await meanwhile();
    });
    return view;
  };

  // Alone, before the blocks below: it reads the origin's gauges, which one reading serves for a
  // while (origin/metrics/metrics.ts), and the worker-tick waits of the tests below read them too.
  it("the check call answers what the transfer then meets, rule by rule, and moves no budget", async () => {
    const agent = await stack.newAgent({ units: 40_000_000n });
    const calls = policyCalls(agent);
    const denied = newAccount().address;
    expect(
      (
        await calls.patch({
          transfers: { per_tx_units: "5000000", daily_count: 3, deny: [denied] },
          approval_above_units: "2000000",
        })
      ).status,
    ).toBe(200);
    const transfers = agentCalls(stack.origin.base, agent.token);
    const cases: Array<[string, { to: string; amount: string }, PolicyCheckResponse]> = [
      [
        "within every rule",
        { to: newAccount().address, amount: "1000000" },
        { decision: "allow", rule: null, remaining: null },
      ],
      [
        "over the per-transaction figure",
        { to: newAccount().address, amount: "6000000" },
        { decision: "deny", rule: "transfers.per_tx_units", remaining: "5000000" },
      ],
      [
        "to a denied recipient",
        { to: denied, amount: "1000" },
        { decision: "deny", rule: "transfers.deny", remaining: "0" },
      ],
      [
        "above the approval threshold",
        { to: newAccount().address, amount: "3000000" },
        { decision: "hold", rule: "approval_above_units", remaining: null },
      ],
    ];
    for (const [name, transfer, expected] of cases) {
      const before = await calls.get();
      expect(await calls.check({ transfer }), name).toEqual(expected);
      expect(await calls.get(), `${name}: the check moved a budget`).toEqual(before);
      const response = await transfers.transfer({ idempotency_key: newKey(), ...transfer });
      if (expected.decision === "deny") {
        expect(response.status, name).toBe(403);
        expect(response.body, name).toMatchObject({
          error: { code: "policy_denied", rule: expected.rule, remaining: expected.remaining },
        });
      } else {
        expect(response.status, name).toBe(202);
        expect((response.body as ActionView).status, name).toBe(
          expected.decision === "hold" ? "held" : "signed",
        );
      }
    }
    // One transfer signed, the held one counted for nothing: the count's budget says so, and the
    // check of the count rule after two more signed transfers answers as the fourth transfer does.
    for (let n = 0; n < 2; n++) {
      const sent = await transfers.transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "1000",
      });
      expect(sent.status).toBe(202);
    }
    const fourth = { to: newAccount().address, amount: "1000" };
    expect(await calls.check({ transfer: fourth })).toEqual({
      decision: "deny",
      rule: "transfers.daily_count",
      remaining: "0",
    });
    expect((await transfers.transfer({ idempotency_key: newKey(), ...fourth })).body).toMatchObject({
      error: { code: "policy_denied", rule: "transfers.daily_count" },
    });
    expect(await outgoing(agent)).toBe(3);
    // The decisions are counted by kind, outcome and rule (origin_policy_decisions_total).
    const scraped = await stack.origin.deps.metrics.registry.metrics();
    for (const [outcome, rule] of [
      ["deny", "transfers.per_tx_units"],
      ["deny", "transfers.daily_count"],
      ["hold", "approval_above_units"],
    ] as const) {
      expect(scraped).toMatch(
        new RegExp(
          `origin_policy_decisions_total\\{kind="transfer",outcome="${outcome}",rule="${rule.replace(".", "\\.")}"\\} [1-9]`,
        ),
      );
    }
    // Holds waiting, and what the budgets of agents with a policy used today (at least this one's).
    expect(scraped).toMatch(/origin_agent_actions\{kind="transfer",state="held"\} [1-9]/);
    const [spent] = await queryRows<{ units: string }>(
      stack.db.handle.db,
      sql`select spent_units::text as units from transfer_daily_spend where agent_id = ${agent.agentId}`,
    );
    const used = /origin_policy_used_units\{kind="transfer"\} (\S+)/.exec(scraped);
    expect(Number(used?.[1])).toBeGreaterThanOrEqual(Number(spent!.units));
    expect(Number(spent!.units)).toBeGreaterThan(0);
  });

  // Two blocks run beside each other (vitest runs adjacent concurrent blocks at once), each
  // block's tests in turn; every test has its own agent and counts only its agent's transactions.
  // The first holds every test that an operator approves (an approval's counter is the time it was
  // signed, so they stay in turn) and every test that holds a sender's nonce row while an origin's
  // approved-transfer loop waits on it; no test of the second has an approved transfer, and none
  // stops the enclave or changes a setting (docs/performance.md, "The test suite").
  describe("approved by an operator", BESIDE, () => {
    it.sequential("holds a transfer above the threshold: 202 held, a repeat answers it, nothing signed; approved by an operator, it is signed and confirmed once", async () => {
      const agent = await stack.newAgent({ units: 20_000_000n });
      expect((await policyCalls(agent).patch({ approval_above_units: "2000000" })).status).toBe(200);
      const transfers = agentCalls(stack.origin.base, agent.token);
      const to = newAccount().address;
      const body = { idempotency_key: newKey(), to, amount: "3000000" };
      const held = await transfers.transfer(body);
      expect(held.status).toBe(202);
      const view = held.body as ActionView;
      expect(view).toMatchObject({ status: "held", rule: "approval_above_units", tx_hash: null });
      expect(Date.parse(view.expires_at!)).toBeGreaterThan(Date.now());
      expect((await transfers.transfer(body)).body).toMatchObject({
        action_id: view.action_id,
        status: "held",
      });
      // A whole round of every origin's approved-transfer loop: a held transfer is not theirs to sign.
      await afterWholeTicks(everyOrigin(), "approved-transfers", 1);
      expect(await outgoing(agent)).toBe(0);

      const expiresAt = Math.floor(Date.now() / 1000) + 3600;
      const approved = await sealHeldApproval(agent, {
        actionId: view.action_id,
        to,
        valueUnits: 3_000_000n,
        expiresAt,
      });
      expect(approved.ok).toBe(true);
      await stack.db.handle.db.execute(
        sql`update agent_actions set status = 'approved', updated_at = now() where action_id = ${view.action_id} and status = 'held'`,
      );
      // The origin's worker signs it; the agent follows it to confirmed.
      const done = await transfers.settled(view.action_id);
      expect(done).toMatchObject({ status: "confirmed", rule: "approval_above_units", expires_at: null });
      expect(await outgoing(agent)).toBe(1);
    });

    it.sequential("an approved transfer of a disabled agent ends expired when its hold would have, and is never signed once the agent is enabled again", async () => {
      const db = stack.db.handle.db;
      const { agent, view } = await approvedOnceBarred(async (barred) => {
        // Disabled first, so nothing signs it while approved: the approval waits for the agent.
        const disabled = await setIdentityEnabled(db, {
          agentId: barred.agentId,
          enabled: false,
          reason: "under review",
          source: "cli",
        });
        expect(disabled.ok).toBe(true);
      });
      expect(
        (
          await setIdentityEnabled(db, {
            agentId: agent.agentId,
            enabled: true,
            reason: "cleared",
            source: "cli",
          })
        ).ok,
      ).toBe(true);
      // Two whole rounds of every origin's approved-transfer loop after the enabling: none signs it.
      await afterWholeTicks(everyOrigin(), "approved-transfers", 2);
      expect((await actionState(view.action_id)).status).toBe("expired");
      expect(await outgoing(agent)).toBe(0);
    });

    it.sequential("an approved transfer whose agent is revoked while its signing waits at the sender's lock is never signed: it ends failed identity_revoked", async ({
      expect,
    }) => {
      // Mutation: the gate reading only the enabled flag (a revocation leaves it as it was) signs it.
      const agent = await stack.newAgent({ units: 20_000_000n });
      const view = await approvedWhileSenderHeld(agent, async () => {
        const revoked = await revokeIdentity(stack.db.handle.db, {
          agentId: agent.agentId,
          reason: "key compromised",
          source: "cli",
        });
        expect(revoked.ok).toBe(true);
      });
      await expect.poll(async () => (await actionState(view.action_id)).status).not.toBe("approved");
      expect(await actionState(view.action_id)).toEqual({
        status: "failed",
        error_code: "funding_gate_closed",
        reason: "identity_revoked",
      });
      await afterWholeTicks(everyOrigin(), "approved-transfers", 1);
      expect(await outgoing(agent)).toBe(0);
    });

    it.sequential("an approved transfer whose agent is disabled while its signing waits at the sender's lock waits, unsigned, and is signed once the agent is enabled again", async () => {
      // As an approved transfer of an agent disabled before it was read: the approval waits for the
      // agent (or the hold's end). Mutation: the sender's gate refusing it ends it failed
      // identity_disabled, its approval lost.
      const db = stack.db.handle.db;
      const agent = await stack.newAgent({ units: 20_000_000n });
      const change = (enabled: boolean) =>
        setIdentityEnabled(db, { agentId: agent.agentId, enabled, reason: "under review", source: "cli" });
      const view = await approvedWhileSenderHeld(agent, async () => {
        expect((await change(false)).ok).toBe(true);
      });
      // Two whole rounds of every origin's approved-transfer loop after the enabling: none signs it.
      await afterWholeTicks(everyOrigin(), "approved-transfers", 2);
      expect((await actionState(view.action_id)).status).toBe("approved");
      expect(await outgoing(agent)).toBe(0);
      expect((await change(true)).ok).toBe(true);
      const done = await agentCalls(stack.origin.base, agent.token).settled(view.action_id);
      expect(done).toMatchObject({ status: "confirmed", error_code: null });
      expect(await outgoing(agent)).toBe(1);
    });

    it.sequential("an approved transfer whose hold ends while its signing waits at the sender's lock ends expired, never signed: it is not held again for a new hold", async ({
      expect,
    }) => {
      // The enclave refuses it as held (its approval lasted until the hold's end), and a hold that
      // has ended cannot be approved again. Mutation: the refusal taken as an approval used up by a
      // lost signature (approval-lost.int.test.ts) holds it again, for a whole new hold.
      const agent = await stack.newAgent({ units: 20_000_000n });
      const holdEndsAt = Math.floor(Date.now() / 1000) + 3;
      const view = await approvedWhileSenderHeld(
        agent,
        async () => {
          // Past the hold's end (and the approval's) before the batch goes on.
          await sleep(Math.max(holdEndsAt * 1000 - Date.now(), 0) + 1_500);
        },
        holdEndsAt,
      );
      await expect.poll(async () => (await actionState(view.action_id)).status).not.toBe("approved");
      const seen = await agentCalls(stack.origin.base, agent.token).action(view.action_id);
      expect(seen.body).toMatchObject({ status: "expired", rule: "approval_above_units", expires_at: null });
      await afterWholeTicks(everyOrigin(), "approved-transfers", 1);
      expect(await outgoing(agent)).toBe(0);
    });

    // A revocation leaves the enabled flag as it was (identity-admin.ts): only `not revoked` keeps the
    // approved transfer of a revoked agent from being signed.
    it.sequential("an approved transfer of a revoked agent is never signed: it ends expired when its hold would have", async () => {
      const db = stack.db.handle.db;
      const { agent } = await approvedOnceBarred(async (barred) => {
        const revoked = await revokeIdentity(db, {
          agentId: barred.agentId,
          reason: "token leaked",
          source: "cli",
        });
        expect(revoked.ok).toBe(true);
      });
      expect(await outgoing(agent)).toBe(0);
    });

    it.sequential("an operator's approval of a loosening that the origin held back while the agent froze itself (its PATCH) is refused by the enclave, operator_policy_changed: the agent stays frozen", async () => {
      const agent = await stack.newAgent();
      const calls = policyCalls(agent);
      const a = { transfers: { daily_units: "1000000" } };
      const b = { transfers: { daily_units: "9000000" } };
      expect((await calls.patch(a)).status).toBe(200);
      const identity = await stack.signer.getSealedIdentity();
      if (!identity.ok) throw new Error(identity.error.code);
      // The operator approves A → B over A; a compromised origin keeps it instead of sealing it.
      const heldBack = signOperatorApproval(operator.key, {
        envId: identity.value.envId,
        chainId: CHAIN_ID,
        instanceId: identity.value.instanceId,
        op: "set_agent_policy",
        subject: agentPolicySubject(agent.keyRef, b),
        policyBefore: agentPolicySubject(agent.keyRef, a),
        keyId: operator.keyId,
        counter: operatorCounterNow(),
        expiresAt: Math.floor(Date.now() / 1000) + 300,
      });
      expect((await calls.patch({ frozen: true })).status).toBe(200);
      const relayed = await changeAgentPolicy(
        { db: stack.db.handle.db, signer: stack.signer, authorize: stack.authorities.admin, nodePayee: null },
        {
          agent: { agentId: agent.agentId, keyRef: agent.keyRef },
          next: b,
          changedBy: { by: "operator", operatorKeyId: operator.keyId },
          operator: heldBack,
        },
      );
      const sealed = await stack.signer.getAgentPolicy({ keyRef: agent.keyRef });
      expect(
        sealed.ok && sealed.value.policy,
        "the enclave sealed the held-back B over the agent's freeze",
      ).toEqual({
        ...a,
        frozen: true,
      });
      expect(relayed).toMatchObject({
        ok: false,
        error: {
          code: "signer",
          failure: { code: "capability_rejected", detail: "operator_policy_changed" },
        },
      });
      expect((await calls.get()).policy).toEqual({ ...a, frozen: true });
    });

    it.sequential("answers a patch whose resource prefix holds a control character 400 naming the field, and changes nothing: neither sealed nor stored", async () => {
      const agent = await stack.newAgent();
      const calls = policyCalls(agent);
      // An operator lists a payee under a prefix; narrowing that prefix is the agent's to do.
      const payee = { pay_to: "0x2222222222222222222222222222222222222222", per_payment_units: "1" };
      const listed = { x402: { payees: [{ ...payee, resource_prefix: "https://pay.example/" }] } };
      const identity = await stack.signer.getSealedIdentity();
      if (!identity.ok) throw new Error(identity.error.code);
      const set = await changeAgentPolicy(
        { db: stack.db.handle.db, signer: stack.signer, authorize: stack.authorities.admin, nodePayee: null },
        {
          agent: { agentId: agent.agentId, keyRef: agent.keyRef },
          next: listed,
          changedBy: { by: "operator", operatorKeyId: operator.keyId },
          operator: signOperatorApproval(operator.key, {
            envId: identity.value.envId,
            chainId: CHAIN_ID,
            instanceId: identity.value.instanceId,
            op: "set_agent_policy",
            subject: agentPolicySubject(agent.keyRef, listed),
            // A new agent: the enclave holds no policy for it yet.
            policyBefore: agentPolicySubject(agent.keyRef, null),
            keyId: operator.keyId,
            counter: operatorCounterNow(),
            expiresAt: Math.floor(Date.now() / 1000) + 300,
          }),
        },
      );
      expect(set.ok).toBe(true);
      // A NUL made the enclave seal the narrower prefix and Postgres then refuse to store it (500).
      for (const resource_prefix of ["https://pay.example/a\u0000", "https://pay.example/\u001b[2J"]) {
        const bad = await calls.patch({ x402: { payees: [{ ...payee, resource_prefix }] } });
        expect(bad.status, JSON.stringify(bad.body)).toBe(400);
        expect(bad.body).toMatchObject({ error: { code: "validation_failed" } });
        expect(JSON.stringify(bad.body)).toContain("resource_prefix");
      }
      expect((await calls.get()).policy).toEqual(listed);
      expect(await sealedVersion(agent)).toBe(1);
    });
  });

  describe("beside the approvals", BESIDE, () => {
    it.sequential("starts with none: GET answers null and no budgets, and /network says the agent has none", async () => {
      const agent = await stack.newAgent();
      expect(await policyCalls(agent).get()).toEqual({
        policy: null,
        version: null,
        node_frozen: false,
        budgets: [],
      });
      const network = await send(`${stack.origin.base}/agent/v1/network`, {
        headers: { authorization: `Bearer ${agent.token}` },
      });
      expect((network.body as { agent: { spending_policy: boolean } }).agent.spending_policy).toBe(false);
    });

    it.sequential("PATCH tightens: sealed in the enclave, then stored; GET shows each budget; a loosening is 403 and changes nothing", async () => {
      const agent = await stack.newAgent({ units: 20_000_000n });
      const calls = policyCalls(agent);
      const set = await calls.patch({
        transfers: { daily_units: "3000000", daily_count: 5 },
        approval_above_units: "2000000",
      });
      expect(set.status).toBe(200);
      expect(set.body).toMatchObject({
        policy: { transfers: { daily_units: "3000000", daily_count: 5 }, approval_above_units: "2000000" },
        version: 1,
      });
      expect(await sealedVersion(agent)).toBe(1);
      // A transfer counts against the day's budget (value plus its maximum fee).
      const sent = await agentCalls(stack.origin.base, agent.token).transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "1000000",
      });
      expect(sent.status).toBe(202);
      const { budgets } = await calls.get();
      const daily = budgets.find((budget) => budget.rule === "transfers.daily_units")!;
      expect(BigInt(daily.used)).toBeGreaterThan(1_000_000n);
      expect(BigInt(daily.remaining)).toBe(3_000_000n - BigInt(daily.used));
      expect(new Date(daily.resets_at).getUTCHours()).toBe(0);
      expect(budgets.find((budget) => budget.rule === "transfers.daily_count")).toMatchObject({
        limit: "5",
        used: "1",
        remaining: "4",
      });
      // Raising a figure, or dropping the approval rule, allows more: an operator's to make.
      for (const loosening of [{ transfers: { daily_units: "3000001" } }, { approval_above_units: null }]) {
        const refused = await calls.patch(loosening);
        expect(refused.status).toBe(403);
        expect(refused.body).toMatchObject({ error: { code: "policy_loosening_requires_operator" } });
      }
      expect((await calls.get()).version).toBe(1);
      expect(await sealedVersion(agent)).toBe(1);
      // A read-only token of the agent cannot change how it spends.
      const reader = await stack.newAgent({ capabilities: ["read"] });
      expect((await policyCalls(reader).patch({ frozen: true })).status).toBe(403);
    });

    it.sequential("two tightening PATCHes of different fields at once both apply: each merges onto the policy the other stored", async () => {
      const agent = await stack.newAgent();
      const calls = policyCalls(agent);
      expect(
        (await calls.patch({ transfers: { daily_units: "20000000", per_tx_units: "5000000" } })).status,
      ).toBe(200);
      // Each lowers a figure the other leaves alone: neither allows more than the policy it meets.
      const [daily, perTx] = await Promise.all([
        calls.patch({ transfers: { daily_units: "10000000" } }),
        calls.patch({ transfers: { per_tx_units: "4000000" } }),
      ]);
      expect([daily.status, perTx.status], JSON.stringify([daily.body, perTx.body])).toEqual([200, 200]);
      const stored = await calls.get();
      expect(stored.policy).toEqual({ transfers: { daily_units: "10000000", per_tx_units: "4000000" } });
      expect(stored.version).toBe(3);
      expect(await sealedVersion(agent)).toBe(3);
    });

    // Mutation: the end stamped by the origin's clock (its now plus the hold) makes this five-minute
    // hold end as it starts, and the next sweep ends it expired before an operator could see it.
    it.sequential("a hold lasts AGENT_POLICY_HOLD_SECONDS by the database's clock, which ends it: on an origin five minutes behind, a five-minute hold is still held, its expires_at five minutes on", async () => {
      const agent = await stack.newAgent({ units: 20_000_000n });
      expect(
        (await policyCalls(agent, behindHolds.base).patch({ approval_above_units: "2000000" })).status,
      ).toBe(200);
      const calls = agentCalls(behindHolds.base, agent.token);
      const held = await calls.transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "3000000",
      });
      expect(held.status).toBe(202);
      const view = held.body as ActionView;
      expect(view.status).toBe("held");
      const [row] = await queryRows<{ held_for: number; left: number }>(
        stack.db.handle.db,
        sql`select extract(epoch from hold_expires_at - created_at)::float8 as held_for,
              extract(epoch from hold_expires_at - now())::float8 as left
            from agent_actions where action_id = ${view.action_id}`,
      );
      expect(row!.held_for).toBeGreaterThan(299);
      expect(row!.held_for).toBeLessThan(302);
      expect(row!.left).toBeGreaterThan(290);
      // The end the agent is told is the one stored, the one the sweep goes by.
      const [stored] = await queryRows<{ hold_expires_at: Date }>(
        stack.db.handle.db,
        sql`select hold_expires_at from agent_actions where action_id = ${view.action_id}`,
      );
      expect(Date.parse(view.expires_at!)).toBe(new Date(stored!.hold_expires_at).getTime());
      // Two of the tracker's sweeps, each begun after the hold was stored, and the hold stands (its
      // ticks do not count: only a sweep ends holds, outbox/tracker.ts).
      await afterWholeSweeps([behindHolds], "tx-tracker", 2);
      expect((await calls.action(view.action_id)).body).toMatchObject({ status: "held" });
      expect(await outgoing(agent)).toBe(0);
    });

    it.sequential("a hold nobody approves ends expired and is never signed: the enclave refuses it without an approval", async () => {
      const agent = await stack.newAgent({ units: 20_000_000n });
      const calls = policyCalls(agent, shortHolds.base);
      expect((await calls.patch({ approval_above_units: "2000000" })).status).toBe(200);
      const to = newAccount().address;
      const held = await agentCalls(shortHolds.base, agent.token).transfer({
        idempotency_key: newKey(),
        to,
        amount: "3000000",
      });
      const view = held.body as ActionView;
      expect(view.status).toBe("held");
      const ended = await agentCalls(shortHolds.base, agent.token).settled(view.action_id, 30_000);
      expect(ended.status).toBe("expired");
      expect(await outgoing(agent)).toBe(0);
      // Signing it straight over the socket, as a compromised origin would: held by the enclave.
      const signed = await signTransferOverSocket(stack.signer, agent, {
        to,
        valueUnits: 3_000_000n,
        actionId: view.action_id,
      });
      expect(signed.ok ? "signed" : `${signed.error.detail}:${signed.error.rule}`).toBe(
        "policy_held:approval_above_units",
      );
    });

    it.sequential("a frozen agent is refused its next transfer by name, reads still work, and only an operator unfreezes it", async () => {
      const agent = await stack.newAgent({ units: 20_000_000n });
      const calls = policyCalls(agent);
      expect((await calls.patch({ frozen: true })).status).toBe(200);
      const refused = await agentCalls(stack.origin.base, agent.token).transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "1000",
      });
      expect(refused.status).toBe(403);
      expect(refused.body).toMatchObject({
        error: { code: "policy_denied", rule: "frozen", remaining: "0" },
      });
      expect(await outgoing(agent)).toBe(0);
      const balance = await send(`${stack.origin.base}/agent/v1/balance`, {
        headers: { authorization: `Bearer ${agent.token}` },
      });
      expect(balance.status).toBe(200);
      expect((await calls.patch({ frozen: false })).body).toMatchObject({
        error: { code: "policy_loosening_requires_operator" },
      });
    });

    it.sequential("a PATCH that tightens the stored policy but loosens the tighter one the enclave holds is 403 naming the rule, not an outage to retry", async () => {
      const agent = await stack.newAgent();
      const calls = policyCalls(agent);
      expect((await calls.patch({ transfers: { daily_units: "10000000" } })).status).toBe(200);
      // The enclave holds a tighter policy than the database: a change sealed whose row was lost
      // (the origin died or its transaction failed after the seal), made here straight over the socket.
      const sealed = await stack.signer.setAgentPolicy(
        { keyRef: agent.keyRef, policy: { transfers: { daily_units: "5000000" } } },
        stack.authorities.admin,
      );
      expect(sealed.ok).toBe(true);
      const refused = await calls.patch({ transfers: { daily_units: "8000000" } });
      expect(refused.status, JSON.stringify(refused.body)).toBe(403);
      expect(refused.body).toMatchObject({
        error: { code: "policy_loosening_requires_operator", loosens: "transfers.daily_units" },
      });
      expect(await sealedVersion(agent)).toBe(2);
      expect((await calls.get()).policy).toEqual({ transfers: { daily_units: "10000000" } });
    });

    it.sequential("answers a malformed patch 400 naming the field, and changes nothing", async () => {
      const agent = await stack.newAgent();
      const calls = policyCalls(agent);
      const bad = await calls.patch({ transfers: { per_tx_units: "-5" } });
      expect(bad.status).toBe(400);
      expect(bad.body).toMatchObject({ error: { code: "validation_failed" } });
      // In words: zod's own message quoted its pattern (/^(0|[1-9][0-9]{0,77})$/).
      expect(bad.body).toMatchObject({
        error: {
          message:
            "the policy after the patch is not valid: transfers.per_tx_units: must be a whole number as a decimal string of at most 78 digits, without sign, fraction or leading zero",
        },
      });
      expect((await calls.get()).policy).toBeNull();
      expect(await sealedVersion(agent)).toBeNull();
    });

    it.sequential("answers a check that is neither one transfer nor one x402 quote 400 saying what it must hold, not a bare Invalid input", async () => {
      const agent = await stack.newAgent();
      const to = newAccount().address;
      const cases: Array<[unknown, string]> = [
        [{}, "the body must hold exactly one of transfer, x402"],
        [{ transfer: { to, amount: "1" }, x402: { payment_required: {} } }, "unknown field: x402"],
        [{ transfer: {}, x402: {} }, "the body must hold exactly one of transfer, x402"],
        [{ amount: "1" }, "the body must hold exactly one of transfer, x402"],
        [{ x402: {} }, "x402.payment_required is required"],
        [{ transfer: { to } }, "transfer.amount is required"],
        [[], "the body must be a JSON object"],
      ];
      for (const [body, message] of cases) {
        const response = await send(`${stack.origin.base}/agent/v1/policy/check`, {
          method: "POST",
          headers: { authorization: `Bearer ${agent.token}` },
          body: JSON.stringify(body),
        });
        // Mutation: without json-body.ts describeUnion, all but the last are "Invalid input".
        expect({ body, status: response.status, error: response.body }).toEqual({
          body,
          status: 400,
          error: { error: { code: "validation_failed", message, request_id: expect.any(String) } },
        });
      }
    });

    it.sequential("answers a patch nested 20,000 deep 400 (the merge would overflow the stack), and changes nothing", async () => {
      const agent = await stack.newAgent();
      const deep = `${'{"a":'.repeat(20_000)}1${"}".repeat(20_000)}`;
      const refused = await send(`${stack.origin.base}/agent/v1/policy`, {
        method: "PATCH",
        headers: { authorization: `Bearer ${agent.token}` },
        body: deep,
      });
      expect(refused.status).toBe(400);
      expect(refused.body).toMatchObject({ error: { code: "validation_failed" } });
      expect(JSON.stringify(refused.body)).toContain("nests deeper");
      expect((await policyCalls(agent).get()).policy).toBeNull();
    });
  });
});
