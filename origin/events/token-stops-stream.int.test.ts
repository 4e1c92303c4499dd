import { sql } from "drizzle-orm";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { parseBearerHeader } from "../../shared/agent-token.ts";
import { sleep } from "../../shared/sleep.ts";
import { consoleCalls, consoleSecrets } from "../../testing/console-client.ts";
import { type FollowedStream, followEvents } from "../../testing/event-stream.ts";
import { send } from "../../testing/http.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { rotateToken } from "../auth/rotate-token.ts";
import { hashSecret } from "../auth/token.ts";
import { queryRows } from "../db/client.ts";
import { applyOutcome } from "../identity/sweep.ts";

// A stream opened with a token ends as soon as the token stops authenticating, whichever way it
// stops (docs/events.md#the-stream): disabled (agent-state-events.int.test.ts), revoked, or
// replaced by a rotation. On the real stack (origin, enclave, devnet, Postgres), through the
// operator's console and rotation and the agent's own rotation route.

const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

describe("an open event stream whose token stops authenticating (real stack)", { timeout: 120_000 }, () => {
  const secrets = consoleSecrets();
  const stack = useMoneyStack({ env: secrets.env }, { timeoutMs: 180_000 });
  const db = () => stack.db.handle.db;
  const eventsUrl = () => `${stack.origin.base}/agent/v1/events`;
  const operator = () =>
    consoleCalls(stack.origin.base, { admin: secrets.adminToken, change: secrets.changeToken });

  /** A finding of the sweep: an agent event written at will, here to mark a point in the log. */
  const finding = (agent: StackAgent, detail: string) =>
    applyOutcome(db(), agent.agentId, {
      verified: false,
      class: "terminal_unknown",
      code: "unexpected_error",
      detail,
    });
  const loggedTypes = async (agent: StackAgent): Promise<string[]> =>
    (
      await queryRows<{ type: string }>(
        db(),
        sql`select type from events where agent_id = ${agent.agentId}::uuid order by xid, id`,
      )
    ).map((row) => row.type);
  /** Until the stream was closed by the service or has `count` events: whichever comes first. */
  const settle = async (stream: FollowedStream, count: number): Promise<void> => {
    for (
      const deadline = Date.now() + 5_000;
      !stream.closedReason() && stream.events.length < count && Date.now() < deadline;
    ) {
      await sleep(50);
    }
  };
  const networkStatus = async (token: string): Promise<number> =>
    (await send(`${stack.origin.base}/agent/v1/network`, { headers: { authorization: `Bearer ${token}` } }))
      .status;

  it("identity.revoked: the stream opened before the revocation carries it, then ends; nothing committed after it reaches the stream", async () => {
    const agent = await stack.newAgent();
    const stream = followEvents({ url: eventsUrl(), token: agent.token });
    try {
      await stream.waitForOpen();
      await finding(agent, "before the revocation");
      await stream.waitForCount(1);

      const revoked = await operator().post("/registration/identity", {
        agent_id: agent.agentId,
        action: "revoke",
        reason: "token leaked",
      });
      expect(revoked.status).toBe(200);
      expect(await networkStatus(agent.token)).toBe(401);
      // Committed after the revocation, and in the log: served to no stream of the revoked token.
      await finding(agent, "after the revocation");
      expect(await loggedTypes(agent)).toEqual(["finding.raised", "identity.revoked", "finding.raised"]);
      await settle(stream, 3);

      expect(stream.events.map((event) => event.type)).toEqual(["finding.raised", "identity.revoked"]);
      expect(stream.closedReason()).toBe("identity_revoked");
      expect(stream.events[1]!.body.data).toEqual({
        agent_id: agent.agentId,
        assigned_wallet: agent.wallet.toLowerCase(),
        revoked: true,
        at: expect.stringMatching(ISO),
      });
      // The operator's reason stays in the console's audit.
      expect(JSON.stringify(stream.events)).not.toContain("token leaked");
    } finally {
      stream.close();
    }
  });

  it("token.rotated: ends the replaced token's stream, not the new token's, though the new one is handed the event too", async () => {
    const agent = await stack.newAgent();
    const old = followEvents({ url: eventsUrl(), token: agent.token });
    let renewed: FollowedStream | undefined;
    let again: FollowedStream | undefined;
    // An older transaction held open: the rotation's event stays unservable until it ends, so a
    // stream the new token opens meanwhile starts before the event and is handed it by the feed,
    // as a stream resumed from before the rotation would be.
    const older = new pg.Client({ connectionString: stack.db.url });
    await older.connect();
    try {
      await old.waitForOpen();
      await finding(agent, "before the rotation");
      await old.waitForCount(1);

      await older.query("begin");
      await older.query("select pg_current_xact_id()");
      const rotated = await rotateToken(db(), { agentId: agent.agentId });
      if (!rotated.ok) throw new Error(`rotation refused: ${rotated.error}`);
      const newToken = rotated.value.token;
      expect(await networkStatus(agent.token)).toBe(401);
      renewed = followEvents({ url: eventsUrl(), token: newToken });
      await renewed.waitForOpen();
      await older.query("commit");

      // Committed after the rotation: the new token's stream gets it, the old token's never.
      await finding(agent, "after the rotation");
      expect(await loggedTypes(agent)).toEqual(["finding.raised", "token.rotated", "finding.raised"]);
      await settle(old, 3);
      await settle(renewed, 2);

      expect(old.events.map((event) => event.type)).toEqual(["finding.raised", "token.rotated"]);
      expect(old.closedReason()).toBe("token_rotated");
      expect(renewed.closedReason()).toBeUndefined();
      expect(renewed.events.map((event) => event.type)).toEqual(["token.rotated", "finding.raised"]);
      expect(old.events[1]!.body.data).toEqual({
        agent_id: agent.agentId,
        assigned_wallet: agent.wallet.toLowerCase(),
        at: expect.stringMatching(ISO),
      });
      // Neither token, nor its id, nor its hash is in the event (webhooks deliver it too).
      const written = JSON.stringify(old.events[1]!.body);
      for (const token of [agent.token, newToken]) {
        const parsed = parseBearerHeader(`Bearer ${token}`)!;
        for (const part of [parsed.tokenId, parsed.secret, hashSecret(parsed.secret).toString("hex")]) {
          expect(written).not.toContain(part);
        }
      }

      // The agent's own rotation ends the stream of the token it replaces in the same way.
      const own = await send(`${stack.origin.base}/agent/v1/token/rotate`, {
        method: "POST",
        headers: { authorization: `Bearer ${newToken}` },
        body: "{}",
      });
      expect(own.status).toBe(200);
      again = followEvents({ url: eventsUrl(), token: (own.body as { token: string }).token });
      await again.waitForOpen();
      await finding(agent, "after the agent's own rotation");
      await settle(renewed, 4);
      expect(renewed.events.map((event) => event.type)).toEqual([
        "token.rotated",
        "finding.raised",
        "token.rotated",
      ]);
      expect(renewed.closedReason()).toBe("token_rotated");
      // Whether the newest token's stream, opened after the rotation, is handed it depends on
      // what else runs on the cluster; either way it goes on.
      await again.waitForCount(1);
      await sleep(300);
      expect(again.events.map((event) => event.type)).toContain("finding.raised");
      expect(again.closedReason()).toBeUndefined();
    } finally {
      await older.end();
      old.close();
      renewed?.close();
      again?.close();
    }
  });
});
