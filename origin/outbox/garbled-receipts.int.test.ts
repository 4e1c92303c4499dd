import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import type { TestOrigin } from "../../testing/origin.ts";
import { startRpcReceiptIdsProxy } from "../../testing/rpc-receipt-ids-proxy.ts";
import { startRpcRefusalProxy } from "../../testing/rpc-refusal-proxy.ts";
import { useFixture, useMoneyStack } from "../../testing/stack.ts";
import { queryRows } from "../db/client.ts";

// A node whose batch answer to receipt reads no longer says which item answers which call: each
// id is on the next call's answer, every id once (a load balancer that split the batch and put it
// back together with the ids out of step; ids that repeat are refused whole, json-rpc-call.ts). An
// item is matched to its call by id (json-rpc-call.ts), so a receipt read for
// one transaction can be another's; a receipt names its own transaction (transactionHash), and one
// that names another must never end this one. The garbled answers come from a FAKE, a pass-through
// (testing/rpc-receipt-ids-proxy.ts) in front of a second one that drops a chosen broadcast
// (testing/rpc-refusal-proxy.ts dropOnce: answered with its hash, never forwarded); the devnet
// answers everything else and mines what reaches it on arrival.

describe("a node that garbles the ids of a batch of receipt reads (real processes, a garbling pass-through)", () => {
  // The stack's own origin reaches the devnet directly: its tracker is slowed right down.
  const stack = useMoneyStack({ tracker: { periodMs: 3_600_000 } }, { timeoutMs: 120_000 });
  const dropping = useFixture(
    "dropping pass-through",
    () => startRpcRefusalProxy(stack.devnet.url),
    (proxy) => proxy.close(),
    { timeoutMs: 120_000 },
  );
  const garbling = useFixture(
    "garbling pass-through",
    () => startRpcReceiptIdsProxy(dropping.url),
    (proxy) => proxy.close(),
    { timeoutMs: 120_000 },
  );
  let origin: TestOrigin;

  beforeAll(async () => {
    // A dropped transfer is sent again 4 s after its last broadcast: after the garbled reads below,
    // which end about 0.6 s after it (a resend before them would be mined, and the test would fail
    // on the lost recipient's balance, not pass).
    origin = await stack.startOrigin({}, { periodMs: 100, resendAfterMs: 4_000 }, garbling.url);
  }, 120_000);

  const statusOf = async (wallet: string): Promise<string | undefined> =>
    (
      await queryRows<{ status: string }>(
        stack.db.handle.db,
        sql`select status from outgoing_transactions where sender = ${wallet.toLowerCase()}`,
      )
    )[0]?.status;

  it("never confirms a transfer the chain has not mined with another transaction's receipt; it confirms once it is mined, paid once", async () => {
    // Mutation: reading a receipt without checking the transaction it names (the code before) records
    // the dropped transfer `confirmed` with the other transfer's receipt: its agent is told it is
    // done, its recipient is never paid, and it is never sent again.
    const [dropped, mined] = await stack.newAgents(2, { units: 1_000_000n });
    const lostRecipient = newAccount().address;
    const paidRecipient = newAccount().address;
    const chain = publicClientFor(stack.devnet.url);
    garbling.setMode("unanswered");
    const lost = dropping.dropOnce((tx) => tx.from === dropped!.wallet.toLowerCase());
    const lostCalls = agentCalls(origin.base, dropped!.token);
    const first = await lostCalls.transfer({ idempotency_key: newKey(), to: lostRecipient, amount: "1000" });
    expect(first.status, JSON.stringify(first.body)).toBe(202);
    await lost;
    await expect.poll(() => statusOf(dropped!.wallet), { timeout: 10_000 }).toBe("submitted");
    // The second transfer is mined on arrival; its receipt is not read yet either.
    const paidCalls = agentCalls(origin.base, mined!.token);
    const second = await paidCalls.transfer({ idempotency_key: newKey(), to: paidRecipient, amount: "1000" });
    expect(second.status, JSON.stringify(second.body)).toBe(202);
    await expect
      .poll(() => chain.getBalance({ address: paidRecipient }), { timeout: 10_000 })
      .toBe(1_000n * WEI_PER_UNIT);
    await expect.poll(() => statusOf(mined!.wallet), { timeout: 10_000 }).toBe("submitted");

    // The tracker reads both receipts in one batch (the dropped transfer first: it was recorded
    // first), the ids out of step: the dropped transfer's id carries the mined one's receipt.
    garbling.setMode("rotatedIds");
    // Three garbled reads (the tracker reads in turn, so the first's outcome is recorded by then),
    // or the transfer's end recorded before them, which is the defect.
    await expect
      .poll(async () => garbling.garbled >= 3 || (await statusOf(dropped!.wallet)) !== "submitted", {
        timeout: 10_000,
      })
      .toBe(true);
    expect(await chain.getBalance({ address: lostRecipient })).toBe(0n);
    expect(await statusOf(dropped!.wallet)).toBe("submitted");

    // Answered truly again: the mined transfer confirms, and the dropped one is sent again, mined and
    // confirmed, its recipient paid once.
    garbling.setMode("through");
    const lostAction = (first.body as ActionView).action_id;
    expect((await paidCalls.settled((second.body as ActionView).action_id)).status).toBe("confirmed");
    expect((await lostCalls.settled(lostAction, 30_000)).status).toBe("confirmed");
    expect(await chain.getBalance({ address: lostRecipient })).toBe(1_000n * WEI_PER_UNIT);
    expect(await chain.getBalance({ address: paidRecipient })).toBe(1_000n * WEI_PER_UNIT);
    expect(await chain.getTransactionCount({ address: dropped!.wallet })).toBe(1);
  }, 90_000);
});
