import { randomBytes } from "node:crypto";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { createGatewayClient, KeyUnavailable } from "../../client/index.ts";
import { newAccount } from "../../devnet/testing.ts";
import { errorMessage } from "../../shared/error-message.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import { spawnOrigin } from "../../testing/origin-process.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { queryRows } from "../db/client.ts";

// A lost enclave looked healthy: a fresh enclave beside a database whose wallets were made in the
// lost one answered every transfer "key_purpose_mismatch … a retry is safe", and /healthz said ok.
// Here the enclave is real and really lacks the key: the database names a key ref it never made.

/** A key ref of the right form that no enclave made. */
const missingKeyRef = (): string => randomBytes(32).toString("hex");

describe("an enclave that does not hold an assigned key (real stack)", () => {
  const stack = useMoneyStack({}, { timeoutMs: 180_000 });
  let agent: StackAgent;
  let realKeyRef = "";

  /** Renames the agent's key ref in the database (its pool row too, so the funding gate still passes). */
  const pointAt = async (agentId: string, keyRef: string): Promise<void> => {
    await stack.db.handle.db.transaction(async (tx) => {
      await tx.execute(sql`update key_pool set key_ref = ${keyRef} where assigned_agent_id = ${agentId}`);
      await tx.execute(
        sql`update agent_identities set agent_transfer_key_ref = ${keyRef} where agent_id = ${agentId}`,
      );
    });
  };

  beforeAll(async () => {
    agent = await stack.newAgent({ units: 20_000_000n });
    const [row] = await queryRows<{ key_ref: string }>(
      stack.db.handle.db,
      sql`select agent_transfer_key_ref as key_ref from agent_identities where agent_id = ${agent.agentId}`,
    );
    realKeyRef = row!.key_ref;
  }, 180_000);

  it("answers a transfer 503 agent_key_unavailable, final for its key, with the instruction to restore", async () => {
    await pointAt(agent.agentId, missingKeyRef());
    try {
      const calls = agentCalls(stack.origin.base, agent.token);
      const body = { idempotency_key: newKey(), to: newAccount().address, amount: "1000000" };
      const first = await calls.transfer(body);
      const repeat = await calls.transfer(body);
      for (const response of [first, repeat]) {
        expect(response.status).toBe(503);
        const error = (response.body as { error: Record<string, unknown> }).error;
        expect(error.code).toBe("agent_key_unavailable");
        expect(error.message).toContain("restores the enclave's keys from their backups");
        expect(error.message).not.toContain("retry with the same");
      }
      const actions = await queryRows<{ status: string; error_code: string | null; tx_hash: string | null }>(
        stack.db.handle.db,
        sql`select status, error_code, tx_hash from agent_actions where agent_id = ${agent.agentId}`,
      );
      expect(actions).toEqual([{ status: "failed", error_code: "agent_key_unavailable", tx_hash: null }]);
    } finally {
      await pointAt(agent.agentId, realKeyRef);
    }
  });

  it("the client throws KeyUnavailable (exit code 22) at once, without retrying the key", async () => {
    await pointAt(agent.agentId, missingKeyRef());
    try {
      const requests: string[] = [];
      const wallet = createGatewayClient({
        baseUrl: stack.origin.base,
        token: agent.token,
        fetch: (input, init) => {
          requests.push(String(input));
          return fetch(input, init);
        },
      });
      const refused = await wallet.transfer({ to: newAccount().address, amount: 1_000_000n }).catch((e) => e);
      expect(refused).toBeInstanceOf(KeyUnavailable);
      expect(refused).toMatchObject({ code: "agent_key_unavailable", status: 503 });
      expect(KeyUnavailable.exitCode).toBe(22);
      // SignerUnavailable and ServiceUnavailable are retried with the key; this one is final.
      expect(requests.filter((url) => url.endsWith("/transfers"))).toHaveLength(1);
    } finally {
      await pointAt(agent.agentId, realKeyRef);
    }
  });

  it("origin/main.ts: /healthz degraded with the instruction once a key is missing; a restart refuses to start", async () => {
    const origin = await spawnOrigin({ env: stack.processEnv() });
    try {
      const healthy = await fetch(`${origin.base}/healthz`);
      expect(healthy.status).toBe(200);
      expect(await healthy.json()).toMatchObject({
        status: "ok",
        enclave: { ok: true, keys: { checked: 1, missing: 0, ok: true } },
      });
      await pointAt(agent.agentId, missingKeyRef());
      const lost = await fetch(`${origin.base}/healthz`);
      expect(lost.status).toBe(200);
      expect(await lost.json()).toMatchObject({
        status: "degraded",
        enclave: {
          ok: true,
          keys: {
            checked: 1,
            missing: 1,
            ok: false,
            instruction: expect.stringContaining('"Disaster recovery"'),
          },
        },
      });
    } finally {
      await origin.stop();
    }
    const again = await spawnOrigin({ env: stack.processEnv() }).then(
      (started) => started.stop().then(() => "started"),
      (error: unknown) => errorMessage(error),
    );
    expect(again).toContain("the enclave does not hold the keys this database assigns");
    await pointAt(agent.agentId, realKeyRef);
  });

  it("an in-process test origin asks as main.ts does: /healthz reports the keys, and it refuses to start without one", async () => {
    // Mutation: testing/origin.ts assembling its own infrastructure without keysHeld (as it once
    // did) fails both halves.
    const healthy = await fetch(`${stack.origin.base}/healthz`);
    expect(await healthy.json()).toMatchObject({ enclave: { keys: { checked: 1, missing: 0, ok: true } } });
    await pointAt(agent.agentId, missingKeyRef());
    try {
      await expect(stack.startOrigin()).rejects.toThrow(
        "the enclave does not hold the keys this database assigns",
      );
    } finally {
      await pointAt(agent.agentId, realKeyRef);
    }
  });
});
