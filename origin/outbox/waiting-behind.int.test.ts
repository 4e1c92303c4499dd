import { sql } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import type { TestOrigin } from "../../testing/origin.ts";
import { type SentTransaction, startRpcRefusalProxy } from "../../testing/rpc-refusal-proxy.ts";
import { useFixture, useMoneyStack } from "../../testing/stack.ts";
import { queryRows } from "../db/client.ts";

// A sender stuck at one nonce for longer than the tracker's replaceAfterMs: its later transactions
// only wait behind it, and "confirm as signed once it is decided" (docs/operations.md). The
// tracker replaces the stuck one with a filler; it must not replace the ones waiting behind it,
// whose fillers (at a higher fee, which a node prefers) would end them `failed`, nothing moved,
// although nothing was wrong with them. Real processes; the pass-through refuses the stuck
// transaction and holds its filler back for a while ("txpool is full"): a node's view the devnet
// cannot be made to produce at one chosen transaction (testing/rpc-refusal-proxy.ts).

describe("transactions waiting behind a stuck nonce (real processes, a refusing pass-through)", () => {
  const stack = useMoneyStack({ tracker: { periodMs: 3_600_000 } }, { timeoutMs: 120_000 });
  const proxy = useFixture(
    "refusing pass-through",
    () => startRpcRefusalProxy(stack.devnet.url),
    (refusing) => refusing.close(),
    { timeoutMs: 120_000 },
  );
  let origin: TestOrigin;
  let chain: ReturnType<typeof publicClientFor>;

  beforeAll(async () => {
    // A transaction unmined for a second and a half counts as stuck.
    origin = await stack.startOrigin(
      {},
      { periodMs: 100, signedGraceMs: 500, replaceAfterMs: 1_500 },
      proxy.url,
    );
    chain = publicClientFor(stack.devnet.url);
  }, 120_000);

  it("replaces only the stuck transaction: the one behind it waits past replaceAfterMs, then confirms as signed", async () => {
    // Mutation: replacing every transaction unmined for replaceAfterMs (the code before) signs a
    // filler at nonce 1 too; the devnet's queue takes it in place of the transfer (a higher fee),
    // and the transfer behind ends failed, nothing moved.
    const agent = await stack.newAgent({ units: 1_000_000n });
    const wallet = agent.wallet.toLowerCase();
    const recipient = newAccount().address;
    const calls = agentCalls(origin.base, agent.token);
    const atNonce = (nonce: number, filler: boolean) => (tx: SentTransaction) =>
      tx.from === wallet && tx.nonce === nonce && (tx.to === wallet) === filler;
    const refusing = proxy.refuseEvery(atNonce(0, false));
    const holding = proxy.refuseEvery(atNonce(0, true), "txpool is full");
    try {
      const stuck = await calls.transfer({ idempotency_key: newKey(), to: recipient, amount: "1000" });
      expect(stuck.status, JSON.stringify(stuck.body)).toBe(202);
      await refusing.first;
      const behind = await calls.transfer({ idempotency_key: newKey(), to: recipient, amount: "2000" });
      expect(behind.status, JSON.stringify(behind.body)).toBe(202);
      await holding.first;
      // Well past replaceAfterMs for both: the one behind has waited in the node's queue all along.
      await sleep(4_000);
      holding.stop();
      const [stuckView, behindView] = await Promise.all(
        [stuck, behind].map((answer) => calls.settled((answer.body as ActionView).action_id)),
      );
      expect(stuckView).toMatchObject({ status: "failed", error_code: "broadcast_refused" });
      expect(behindView!.status).toBe("confirmed");
    } finally {
      holding.stop();
      refusing.stop();
    }
    expect(
      await queryRows(
        stack.db.handle.db,
        sql`select nonce::text as nonce, purpose, status from outgoing_transactions where sender = ${wallet}
            order by nonce, created_at`,
      ),
    ).toEqual([
      { nonce: "0", purpose: "transfer", status: "failed" },
      { nonce: "0", purpose: "filler", status: "confirmed" },
      { nonce: "1", purpose: "transfer", status: "confirmed" },
    ]);
    expect(await chain.getBalance({ address: recipient })).toBe(2_000n * WEI_PER_UNIT);
  }, 60_000);
});
