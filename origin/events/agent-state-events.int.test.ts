import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import pg from "pg";
import type { Address, Hex } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount } from "../../devnet/testing.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import { consoleCalls, consoleSecrets } from "../../testing/console-client.ts";
import { type FollowedStream, followEvents } from "../../testing/event-stream.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { afterFeedReads } from "../../testing/worker-ticks.ts";
import { sellerQuote } from "../../testing/x402-quote.ts";
import { queryRows } from "../db/client.ts";
import { applyOutcome } from "../identity/sweep.ts";

// An agent's events beyond its actions' statuses (docs/events.md#the-event-log), on the real stack
// (origin, enclave, devnet, Postgres): x402.authorization.signed through the real authorize route,
// identity.disabled and .enabled through the operator console, finding.raised through the sweep's
// own statement; each written once for its change, in its transaction, and on the agent's own
// stream only.

const AMOUNT = 10_000n;
const PAY_TO = newAccount().address.toLowerCase() as Address;
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** A chain-77 quote the stack's sealed x402 terms accept (docs/x402.md#the-demo-and-the-facilitator). */
const quote = () => sellerQuote({ payTo: PAY_TO, amount: AMOUNT, url: "http://127.0.0.1/77/x402/demo" });

type LoggedRow = { id: string; type: string; data: Record<string, unknown> };

describe("an agent's x402, identity and finding events (real stack)", { timeout: 120_000 }, () => {
  const secrets = consoleSecrets();
  const stack = useMoneyStack(
    { env: secrets.env, x402: { amountUnits: AMOUNT, payTo: PAY_TO } },
    { timeoutMs: 180_000 },
  );
  const db = () => stack.db.handle.db;
  const eventsUrl = (query = "") => `${stack.origin.base}/agent/v1/events${query}`;
  const operator = () =>
    consoleCalls(stack.origin.base, { admin: secrets.adminToken, change: secrets.changeToken });

  const agentEvents = (agent: StackAgent, types: readonly string[]) =>
    queryRows<LoggedRow>(
      db(),
      sql`select id::text as id, type, data from events
          where agent_id = ${agent.agentId}::uuid and type = any(${`{${types.join(",")}}`}::text[])
          order by xid, id`,
    );
  /** Runs `statement` in a transaction rolled back: a change that never happened writes no event. */
  const rolledBack = async (statement: string, values: unknown[]): Promise<void> => {
    const client = new pg.Client({ connectionString: stack.db.url });
    await client.connect();
    try {
      await client.query("begin");
      await client.query(statement, values);
      await client.query("rollback");
    } finally {
      await client.end();
    }
  };

  it("x402.authorization.signed: once, when the authorization is signed, its data the action as GET answers it", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const stream = followEvents({ url: eventsUrl(), token: agent.token });
    try {
      // With no cursor the stream starts where the log is when it opens: wait for that, not a time.
      await stream.waitForOpen();
      const body = { payment_required: quote(), nonce: `0x${randomBytes(32).toString("hex")}` as Hex };
      const authorize = () =>
        fetch(`${stack.origin.base}/agent/v1/x402/authorize`, {
          method: "POST",
          headers: { authorization: `Bearer ${agent.token}`, "content-type": "application/json" },
          body: JSON.stringify(body),
        });
      const answered = await authorize();
      expect(answered.status).toBe(200);
      const actionId = ((await answered.json()) as { action_id: string }).action_id;
      // A repeat is answered from what was stored: nothing is signed again, no event is written.
      expect((await authorize()).status).toBe(200);

      const logged = await agentEvents(agent, [
        "action.requested",
        "action.signed",
        "x402.authorization.signed",
      ]);
      expect(logged.filter((event) => event.data.action_id === actionId).map((event) => event.type)).toEqual([
        "action.requested",
        "action.signed",
        "x402.authorization.signed",
      ]);
      const view = await agentCalls(stack.origin.base, agent.token).action(actionId);
      expect(logged.at(-1)!.data).toEqual(view.body as ActionView);
      expect(logged.at(-1)!.data).toMatchObject({ kind: "x402", status: "signed" });

      // The agent's stream carries it, right after the action's own.
      const received = await stream.waitForCount(3);
      expect(received.map((event) => event.type)).toEqual([
        "action.requested",
        "action.signed",
        "x402.authorization.signed",
      ]);
      expect(received[2]!.body.data).toEqual(view.body);

      // A transfer's signature is not an x402 authorization; an x402 action signed in a transaction
      // that rolls back writes nothing.
      const [pending] = await queryRows<{ action_id: string }>(
        db(),
        sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address)
            values (${agent.agentId}::uuid, 'x402', ${newKey()}, 'test', 5, ${PAY_TO}) returning action_id`,
      );
      await rolledBack("update agent_actions set status = 'signed' where action_id = $1", [
        pending!.action_id,
      ]);
      const [transfer] = await queryRows<{ action_id: string }>(
        db(),
        sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address)
            values (${agent.agentId}::uuid, 'transfer', ${newKey()}, 'test', 5, ${PAY_TO}) returning action_id`,
      );
      await db().execute(
        sql`update agent_actions set status = 'signed' where action_id = ${transfer!.action_id}::uuid`,
      );
      const signed = await agentEvents(agent, ["x402.authorization.signed"]);
      expect(signed.map((event) => event.data.action_id)).toEqual([actionId]);
    } finally {
      stream.close();
    }
  });

  it("identity.disabled and identity.enabled: one per change, on the agent's own stream and no other; the disable ends the stream", async () => {
    const agent = await stack.newAgent();
    const other = await stack.newAgent();
    const stream = followEvents({ url: eventsUrl(), token: agent.token });
    const otherStream = followEvents({ url: eventsUrl(), token: other.token });
    let resumed: FollowedStream | undefined;
    try {
      await stream.waitForOpen();
      await otherStream.waitForOpen();
      await rolledBack("update agent_identities set enabled = false where agent_id = $1", [agent.agentId]);
      const change = (action: "disable" | "enable") =>
        operator().post("/registration/identity", {
          agent_id: agent.agentId,
          action,
          reason: "investigating",
        });
      expect((await change("disable")).status).toBe(200);
      // The state it already has, through the console or any writer: no change, no event.
      expect((await change("disable")).status).toBe(200);
      await db().execute(
        sql`update agent_identities set enabled = false where agent_id = ${agent.agentId}::uuid`,
      );
      const received = await stream.waitForCount(1);
      expect(received[0]!.type).toBe("identity.disabled");
      // The stream opened before the disable ends with it: its token is no longer accepted.
      for (const deadline = Date.now() + 5_000; !stream.closedReason() && Date.now() < deadline; ) {
        await sleep(50);
      }
      expect(stream.closedReason()).toBe("identity_disabled");

      expect((await change("enable")).status).toBe(200);
      const logged = await agentEvents(agent, ["identity.disabled", "identity.enabled"]);
      expect(logged.map((event) => event.type)).toEqual(["identity.disabled", "identity.enabled"]);
      const [disabledAt] = await queryRows<{ at: string }>(
        db(),
        sql`select js_iso_timestamp(changed_at) as at from identity_changes
            where agent_id = ${agent.agentId}::uuid and not after_enabled`,
      );
      expect(logged[0]!.data).toEqual({
        agent_id: agent.agentId,
        assigned_wallet: agent.wallet.toLowerCase(),
        enabled: false,
        at: expect.stringMatching(ISO),
      });
      // The disable's time, to the transaction (the audit row's is the statement's, a little later).
      expect(Date.parse(logged[0]!.data.at as string)).toBeLessThanOrEqual(Date.parse(disabledAt!.at));
      expect(logged[1]!.data).toMatchObject({
        agent_id: agent.agentId,
        enabled: true,
        at: expect.stringMatching(ISO),
      });
      // The operator's reason stays in the console's audit: the agent's stream carries this event.
      expect(JSON.stringify(logged)).not.toContain("investigating");

      // The stream opened before the disable carried the disable and ended; once the token works
      // again, resuming after its last event gets the enable.
      expect(stream.events.map((event) => event.type)).toEqual(["identity.disabled"]);
      expect(stream.events[0]!.body.data).toEqual(logged[0]!.data);
      resumed = followEvents({ url: eventsUrl(), token: agent.token, lastEventId: stream.events[0]!.id });
      await resumed.waitForCount(1);
      expect(resumed.events.map((event) => event.type)).toEqual(["identity.enabled"]);
      // The other agent's stream follows the same feed: its reads hand it none of these.
      await afterFeedReads([stack.origin]);
      expect(otherStream.events).toEqual([]);
    } finally {
      stream.close();
      otherStream.close();
      resumed?.close();
    }
  });

  it("finding.raised: one per finding the sweep records, its data as the console lists it; a destructive one disables", async () => {
    const agent = await stack.newAgent();
    await rolledBack(
      "insert into identity_findings (agent_id, class, code, detail) values ($1, 'terminal_unknown', 'x', 'y')",
      [agent.agentId],
    );
    expect(await agentEvents(agent, ["finding.raised"])).toEqual([]);

    const detail = "connect ENOENT /run/internal/enclave.sock";
    expect(
      await applyOutcome(db(), agent.agentId, {
        verified: false,
        class: "terminal_unknown",
        code: "unexpected_error",
        detail,
      }),
    ).toBe("finding");
    const [first] = await agentEvents(agent, ["finding.raised"]);
    const listed = (await operator().get("/operations")).body as {
      identity_findings: { recent: Array<Record<string, unknown>> };
    };
    const shown = listed.identity_findings.recent.find((finding) => finding.agent_id === agent.agentId);
    expect(first!.data).toEqual(shown);
    expect(first!.data).toMatchObject({ class: "terminal_unknown", code: "unexpected_error" });
    expect(JSON.stringify(first!.data)).not.toContain(detail);

    const destructive = {
      verified: false as const,
      class: "destructive" as const,
      code: "wrong_address",
      detail: "the key answers for another address",
    };
    expect(await applyOutcome(db(), agent.agentId, destructive)).toBe("disabled");
    // Already disabled: the sweep changes and records nothing, so nothing is written.
    expect(await applyOutcome(db(), agent.agentId, destructive)).toBe("already_disabled");
    const logged = await agentEvents(agent, ["finding.raised", "identity.disabled", "identity.enabled"]);
    expect(logged.map((event) => [event.type, event.data.class ?? event.data.enabled])).toEqual([
      ["finding.raised", "terminal_unknown"],
      ["identity.disabled", false],
      ["finding.raised", "destructive"],
    ]);
  });
});
