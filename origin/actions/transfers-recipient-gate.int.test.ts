import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor, rpc } from "../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import type { TestResponse } from "../../testing/http.ts";
import { backendPid, waitUntilBlockedBy } from "../../testing/lock-waiters.ts";
import { agentCalls, isAccepted, newKey } from "../../testing/money-client.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import type { TestOrigin } from "../../testing/origin.ts";
import { type RpcCutProxy, startRpcCutProxy } from "../../testing/rpc-cut-proxy.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { queryRows } from "../db/client.ts";
import { grantException } from "../funding/exceptions.ts";
import { revokeIdentity } from "../identity/identity-admin.ts";

// POST /agent/v1/transfers into another agent's wallet, against the real stack (origin, enclave,
// devnet, Postgres): the funding gate holds the recipient as it holds a faucet payout's wallet
// (docs/api.md, "The funding gate"), and an outside address not at all.

describe("transfers: the funding gate of a recipient that is one of the service's wallets (real stack)", () => {
  // Per-transaction 10 USDC, daily 50 USDC (the stack's policy, sealed in the enclave).
  const stack = useMoneyStack();
  let chain: ReturnType<typeof publicClientFor>;

  beforeAll(async () => {
    chain = publicClientFor(stack.devnet.url);
  });

  const balance = (address: Address) => chain.getBalance({ address });
  const actionRow = async (actionId: string) => {
    const [row] = await queryRows<{ status: string; error_code: string | null; tx_id: string | null }>(
      stack.db.handle.db,
      sql`select status, error_code, tx_id from agent_actions where action_id = ${actionId}`,
    );
    return row;
  };
  const transfer = (from: StackAgent, to: string, amount: string, key = newKey()) =>
    agentCalls(stack.origin.base, from.token).transfer({ idempotency_key: key, to, amount });
  /** Grants `wallet` a pre-restore ceiling of `units` for an hour. */
  const ceiling = async (wallet: string, units: bigint): Promise<void> => {
    const granted = await grantException(stack.db.handle.db, {
      wallet,
      ceilingUnits: units,
      expiresAt: new Date(Date.now() + 3_600_000),
      reason: "recipient under a ceiling",
    });
    expect(granted.ok).toBe(true);
  };

  /**
   * The transfer was refused by the recipient's gate with `reason`: 403 naming the recipient, its
   * action ended `failed` with nothing signed.
   */
  const expectRecipientRefused = async (response: TestResponse, reason: string): Promise<void> => {
    expect(response.status, JSON.stringify(response.body)).toBe(403);
    const error = (response.body as { error: Record<string, string> }).error;
    expect(error).toMatchObject({
      code: "funding_gate_closed",
      reason,
      message: expect.stringMatching(/^the recipient is another wallet of this service/),
    });
    expect(await actionRow(error.action_id!)).toEqual({
      status: "failed",
      error_code: "funding_gate_closed",
      tx_id: null,
    });
  };

  /**
   * Waits until `count` outbox batches (outbox/submit.ts lockStatement) wait at the nonce rows this
   * test holds: a lock wait of anything else (an origin's worker, another file's database) does not
   * count, or the test would go on before its transfer is blocked.
   */
  const batchesWaiting = (holder: number, count: number) =>
    waitUntilBlockedBy(stack.db.handle.db, {
      holder,
      statement: "insert into sender_nonces",
      count,
      what: `${count} transfer batch(es) wait at the held senders' nonce rows`,
    });

  /**
   * Holds the nonce rows of `senders` (their batches wait at their lock) while `during` runs, then
   * lets them go. The rows are made first, as a sender's first batch makes them.
   */
  const withSendersHeld = async <T>(
    senders: StackAgent[],
    during: (holder: number) => Promise<T>,
  ): Promise<T> => {
    const addresses = senders.map((sender) => sender.wallet.toLowerCase());
    for (const address of addresses) {
      await stack.db.handle.db.execute(
        sql`insert into sender_nonces (address, next_nonce) values (${address}, 0) on conflict do nothing`,
      );
    }
    let result: T | undefined;
    await stack.db.handle.db.transaction(async (tx) => {
      for (const address of addresses) {
        await tx.execute(sql`select 1 from sender_nonces where address = ${address} for update`);
      }
      result = await during(await backendPid(tx));
    });
    return result as T;
  };

  it("refuses a transfer into an agent wallet no restore drill has reproduced (zero_only): 403 no_restore_evidence, nothing signed", async () => {
    // Mutation: dropping the recipient's gate from transfers.ts signs this (202).
    const sender = await stack.newAgent({ units: 2_000_000n });
    const recipient = await stack.newAgent({ drilled: false });
    const senderBefore = await balance(sender.wallet);
    await expectRecipientRefused(await transfer(sender, recipient.wallet, "1000"), "no_restore_evidence");
    expect(await balance(sender.wallet)).toBe(senderBefore);
    expect(await balance(recipient.wallet)).toBe(0n);
    expect(await chain.getTransactionCount({ address: sender.wallet })).toBe(0);
  });

  it("still pays an outside address: the recipient's gate is only for the service's own wallets", async () => {
    // Mutation: gating every recipient (evaluateWalletGate(null) refuses: "not one of this
    // service's") answers this 403 batch_not_backed_up.
    const sender = await stack.newAgent({ units: 2_000_000n });
    const outside = newAccount().address;
    const paid = await transfer(sender, outside, "1000");
    expect(isAccepted(paid), JSON.stringify(paid.body)).toBe(true);
    const done = await agentCalls(stack.origin.base, sender.token).settled(
      (paid.body as ActionView).action_id,
    );
    expect(done.status).toBe("confirmed");
    expect(await balance(outside)).toBe(1_000n * WEI_PER_UNIT);
  });

  it("refuses a transfer into a disabled agent's wallet: 403 identity_disabled, nothing signed", async () => {
    // A drilled wallet: only the disable stands in the way. Mutation: dropping the recipient's gate
    // signs this (202).
    const sender = await stack.newAgent({ units: 2_000_000n });
    const recipient = await stack.newAgent();
    await stack.db.handle.db.execute(
      sql`update agent_identities set enabled = false where agent_id = ${recipient.agentId}`,
    );
    const senderBefore = await balance(sender.wallet);
    await expectRecipientRefused(await transfer(sender, recipient.wallet, "1000"), "identity_disabled");
    expect(await balance(sender.wallet)).toBe(senderBefore);
    expect(await balance(recipient.wallet)).toBe(0n);
  });

  it("refuses a transfer into an agent's wallet whose identity is revoked while the transfer waits at its sender's lock: 403 identity_revoked, nothing signed", async () => {
    // The request is authenticated and claimed before the revocation commits, and its batch reads
    // the gate's facts after it, under the sender's lock. Revocation is final: nothing brings the
    // wallet back into use, so what it receives would stay there. Mutation: the gate reading only
    // the enabled flag (a revocation leaves it as it was) signs this (202).
    const sender = await stack.newAgent({ units: 2_000_000n });
    const recipient = await stack.newAgent();
    const senderBefore = await balance(sender.wallet);
    const [answer] = await withSendersHeld([sender], async (holder) => {
      const sent = transfer(sender, recipient.wallet, "1000");
      await batchesWaiting(holder, 1);
      const revoked = await revokeIdentity(stack.db.handle.db, {
        agentId: recipient.agentId,
        reason: "key compromised",
        source: "cli",
      });
      expect(revoked.ok).toBe(true);
      return [sent];
    }).then((sent) => Promise.all(sent));
    await expectRecipientRefused(answer!, "identity_revoked");
    expect(await balance(sender.wallet)).toBe(senderBefore);
    expect(await balance(recipient.wallet)).toBe(0n);
  });

  it("holds a recipient under an approved_non_zero exception to its ceiling: what it holds plus the amount at most the ceiling", async () => {
    // Holding 0.5 USDC under a 1 USDC ceiling: 0.4 goes (0.9), then 0.100001 would leave it a unit
    // over and is refused, and 0.1 brings it exactly to the ceiling. Mutation: weighing the amount
    // alone, without the recipient's balance, or dropping the recipient's gate, signs the second.
    const sender = await stack.newAgent({ units: 5_000_000n });
    const calls = agentCalls(stack.origin.base, sender.token);
    const recipient = await stack.newAgent({ drilled: false, units: 500_000n });
    await ceiling(recipient.wallet, 1_000_000n);
    const first = await transfer(sender, recipient.wallet, "400000");
    expect(isAccepted(first), JSON.stringify(first.body)).toBe(true);
    expect((await calls.settled((first.body as ActionView).action_id)).status).toBe("confirmed");
    const senderBefore = await balance(sender.wallet);
    await expectRecipientRefused(await transfer(sender, recipient.wallet, "100001"), "ceiling_exceeded");
    expect(await balance(sender.wallet)).toBe(senderBefore);
    const last = await transfer(sender, recipient.wallet, "100000");
    expect(isAccepted(last), JSON.stringify(last.body)).toBe(true);
    expect((await calls.settled((last.body as ActionView).action_id)).status).toBe("confirmed");
    expect(await balance(recipient.wallet)).toBe(1_000_000n * WEI_PER_UNIT);
  });

  it("signs exactly one of two concurrent transfers from two agents into one wallet under a ceiling, each within it alone, not together", async () => {
    // 0.6 USDC each under a 1 USDC ceiling. Both requests wait at their senders' nonce rows, in two
    // batches (the second sent once the first waits), and go on together; the chain mines nothing
    // until both are answered, so the first is still in flight when the second is checked.
    // Mutations: without the lock of the recipient's ceiling (batch-store.ts lockCeilingsStatement)
    // both batches read the facts at once and both are signed; without what is in flight to the
    // recipient (the facts' `incoming`) the second sees an empty wallet and is signed too.
    const [a, b] = [await stack.newAgent({ units: 2_000_000n }), await stack.newAgent({ units: 2_000_000n })];
    const recipient = await stack.newAgent({ drilled: false });
    await ceiling(recipient.wallet, 1_000_000n);
    expect(await rpc(stack.devnet.url, "dev_setAutomine", [false])).toMatchObject({ result: true });
    let answers: TestResponse[];
    try {
      answers = await withSendersHeld([a!, b!], async (holder) => {
        const first = transfer(a!, recipient.wallet, "600000");
        await batchesWaiting(holder, 1);
        const second = transfer(b!, recipient.wallet, "600000");
        await batchesWaiting(holder, 2);
        return [first, second];
      }).then((sent) => Promise.all(sent));
    } finally {
      await rpc(stack.devnet.url, "dev_setAutomine", [true]);
      await rpc(stack.devnet.url, "dev_mine", []);
    }
    const statuses = answers.map((answer) => (answer.status === 200 ? 202 : answer.status)).sort();
    expect(statuses, JSON.stringify(answers.map((answer) => answer.body))).toEqual([202, 403]);
    await expectRecipientRefused(answers.find((answer) => answer.status === 403)!, "ceiling_exceeded");
    const signed = answers.find(isAccepted)!;
    const payer = signed === answers[0] ? a! : b!;
    const done = await agentCalls(stack.origin.base, payer.token).settled(
      (signed.body as ActionView).action_id,
    );
    expect(done.status).toBe("confirmed");
    expect(await balance(recipient.wallet)).toBe(600_000n * WEI_PER_UNIT);
  });

  describe("a chain that does not give the recipient's balance", () => {
    let proxy: RpcCutProxy;
    let origin: TestOrigin;
    afterAll(async () => {
      // Its origin first (the stack would close it again, which is a no-op), then its chain.
      await origin?.close();
      await proxy?.close();
    });

    it("answers 503 chain_unavailable and signs nothing, the action left requested; the same key signs once the chain answers", async () => {
      // The balance of a recipient under a ceiling is read behind the batch's locks; the request
      // waits at its sender's nonce row while the chain stops answering balance reads. Mutation:
      // reading a missing balance as zero signs it (202); storing the not-now as a refusal ends
      // the action `failed`, and the retry answers 503 again instead of signing.
      proxy = await startRpcCutProxy(stack.devnet.url);
      origin = await stack.startOrigin({}, undefined, proxy.url);
      const sender = await stack.newAgent({ units: 2_000_000n });
      const recipient = await stack.newAgent({ drilled: false });
      await ceiling(recipient.wallet, 1_000_000n);
      const calls = agentCalls(origin.base, sender.token);
      const body = { idempotency_key: newKey(), to: recipient.wallet, amount: "1000" };
      let refused: TestResponse;
      try {
        const [sent] = await withSendersHeld([sender], async (holder) => {
          const sent = calls.transfer(body);
          await batchesWaiting(holder, 1);
          proxy.withhold("eth_getBalance");
          return [sent];
        });
        refused = await sent!;
      } finally {
        proxy.withhold(undefined);
      }
      expect(refused.status, JSON.stringify(refused.body)).toBe(503);
      const error = (refused.body as { error: Record<string, string> }).error;
      expect(error).toMatchObject({ code: "chain_unavailable" });
      expect(await actionRow(error.action_id!)).toEqual({
        status: "requested",
        error_code: "chain_unavailable",
        tx_id: null,
      });
      const retried = await calls.transfer(body);
      expect(isAccepted(retried), JSON.stringify(retried.body)).toBe(true);
      expect((retried.body as ActionView).action_id).toBe(error.action_id);
      expect((await calls.settled(error.action_id!)).status).toBe("confirmed");
      expect(await balance(recipient.wallet)).toBe(1_000n * WEI_PER_UNIT);
    });
  });
});
