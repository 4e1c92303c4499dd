import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { newAccount } from "../../devnet/testing.ts";
import { generateOperatorKey, type OperatorKey, readOperatorKey } from "../../ops/lib/operator-key.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import { sealHeldApproval as sealApproval } from "../../testing/held-approval.ts";
import { send } from "../../testing/http.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import { signTransferOverSocket } from "../../testing/socket-transfer.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { queryRows } from "../db/client.ts";

// An operator's approval of a held transfer is used up in the enclave by the signature it allows,
// which the origin then stores. An origin killed between the two, or a signature whose answer was
// lost, leaves the row `approved` and the enclave with no approval of it: the next signing is
// refused as held. A stack of its own, with the one origin, so that no other origin's hold length
// decides what the test sees.

describe("an approved transfer whose approval a lost signature used up (real stack)", () => {
  const stack = useMoneyStack();
  let operator: { key: OperatorKey; keyId: string };

  beforeAll(async () => {
    const file = path.join(await mkdtemp(path.join(tmpdir(), "operator-")), "operator.key");
    const { publicKey } = await generateOperatorKey(file);
    const keyId = "test-operator";
    const enrolled = await stack.signer.enrollOperatorKey({ keyId, publicKey }, stack.authorities.policy);
    if (!enrolled.ok) throw new Error(`enroll: ${enrolled.error.code}`);
    operator = { key: await readOperatorKey(file), keyId };
  });

  const sealHeldApproval = (agent: StackAgent, held: Parameters<typeof sealApproval>[3]) =>
    sealApproval(stack, operator, agent, held);
  const outgoing = async (agent: StackAgent): Promise<number> => {
    const [row] = await queryRows<{ n: number }>(
      stack.db.handle.db,
      sql`select count(*)::int as n from outgoing_transactions where sender = ${agent.wallet.toLowerCase()}`,
    );
    return row!.n;
  };
  const patchPolicy = (agent: StackAgent, body: unknown) =>
    send(`${stack.origin.base}/agent/v1/policy`, {
      method: "PATCH",
      headers: { authorization: `Bearer ${agent.token}` },
      body: JSON.stringify(body),
    });

  it("an approved transfer whose approval a lost signature used up is held again for a new approval, not denied; approved again, it is signed once", async () => {
    const agent = await stack.newAgent({ units: 20_000_000n });
    expect((await patchPolicy(agent, { approval_above_units: "2000000" })).status).toBe(200);
    const transfers = agentCalls(stack.origin.base, agent.token);
    const to = newAccount().address;
    const held = (await transfers.transfer({ idempotency_key: newKey(), to, amount: "3000000" }))
      .body as ActionView;
    expect(held).toMatchObject({ status: "held" });
    const expiresAt = Math.floor(Date.now() / 1000) + 3600;
    const approve = async () => {
      const sealed = await sealHeldApproval(agent, {
        actionId: held.action_id,
        to,
        valueUnits: 3_000_000n,
        expiresAt,
      });
      expect(sealed.ok).toBe(true);
      await stack.db.handle.db.execute(
        sql`update agent_actions set status = 'approved', updated_at = now() where action_id = ${held.action_id} and status = 'held'`,
      );
    };
    // An origin signed the approved transfer and died before storing it (or its answer never came
    // back): the enclave spent the approval on a signature nobody holds, and the row says approved.
    const sealed = await sealHeldApproval(agent, {
      actionId: held.action_id,
      to,
      valueUnits: 3_000_000n,
      expiresAt,
    });
    expect(sealed.ok).toBe(true);
    const lost = await signTransferOverSocket(stack.signer, agent, {
      to,
      valueUnits: 3_000_000n,
      actionId: held.action_id,
    });
    expect(lost.ok).toBe(true);
    await stack.db.handle.db.execute(
      sql`update agent_actions set status = 'approved', updated_at = now() where action_id = ${held.action_id}`,
    );
    const status = async () => {
      const [row] = await queryRows<{ status: string; error_code: string | null; hold_rule: string | null }>(
        stack.db.handle.db,
        sql`select status, error_code, hold_rule from agent_actions where action_id = ${held.action_id}`,
      );
      return row!;
    };
    for (
      const deadline = Date.now() + 15_000;
      (await status()).status === "approved" && Date.now() < deadline;
    )
      await sleep(250);
    // Not `failed` policy_denied, as if no operator had approved it: held, awaiting an approval.
    expect(await status()).toMatchObject({
      status: "held",
      error_code: null,
      hold_rule: "approval_above_units",
    });
    expect(await outgoing(agent)).toBe(0);
    await approve();
    expect(await transfers.settled(held.action_id)).toMatchObject({ status: "confirmed" });
    expect(await outgoing(agent)).toBe(1);
  });
});
