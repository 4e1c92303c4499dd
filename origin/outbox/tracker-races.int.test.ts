import { sql } from "drizzle-orm";
import { keccak256 } from "viem";
import { describe, expect, it } from "vitest";
import { fund, newAccount, publicClientFor, usdc } from "../../devnet/testing.ts";
import { CHAIN_ID } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import { startRewritingEnclaveProxy } from "../../testing/fault-enclave.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import { type SentTransaction, startRpcRefusalProxy } from "../../testing/rpc-refusal-proxy.ts";
import { useFixture, useMoneyStack } from "../../testing/stack.ts";
import { createFeeOracle } from "../chain/fees.ts";
import { createJsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { OUTBOX_DOMAINS } from "../compose.ts";
import { queryRows } from "../db/client.ts";
import { createLogger } from "../logger.ts";
import { createSignerClient } from "../signer/create-signer-client.ts";
import { createOutbox } from "./outbox.ts";
import { broadcastStored } from "./sender.ts";
import { createOutboxStore } from "./store.ts";

// Two origins' trackers on one database, ticking at the same instant, against the real processes:
// each stored transaction is broadcast by one of them at a time (the broadcast lease), and a stuck
// transaction gets one filler (the re-check under the sender's nonce row lock), not one each.

describe("two trackers racing (real processes)", () => {
  const stack = useMoneyStack({ tracker: { periodMs: 3_600_000 } }, { timeoutMs: 120_000 });
  const proxy = useFixture(
    "refusing pass-through",
    () => startRpcRefusalProxy(stack.devnet.url),
    (refusing) => refusing.close(),
    { timeoutMs: 120_000 },
  );
  let signFillerAnswers = 0;
  const counting = useFixture(
    "enclave proxy counting sign_filler answers",
    () =>
      startRewritingEnclaveProxy(stack.enclave.socketPath, (op, response) => {
        if (op === "sign_filler") signFillerAnswers++;
        return response;
      }),
    (enclaveProxy) => enclaveProxy.close(),
  );

  /** Two outboxes' trackers as two origins run them: each its own chain client and signer connection. */
  const twoTrackers = () =>
    [0, 1].map(() => {
      const rpc = createJsonRpcUpstream({ url: proxy.url, timeoutMs: 5_000 });
      const signer = createSignerClient({ endpoint: counting.endpoint, liveIdentityEnabled: true });
      const { tracker } = createOutbox(
        {
          db: stack.db.handle.db,
          rpc,
          logger: createLogger(process.env.TEST_ORIGIN_LOG ? "info" : "silent"),
          signer,
          fees: createFeeOracle({ rpc, feeCeilingWei: stack.policy.feeCeilingWei }),
          serviceKeys: new Map(),
          chainTimeoutMs: 5_000,
          maxWaiting: 128,
          tracker: { signedGraceMs: 0 },
        },
        OUTBOX_DOMAINS,
      );
      return {
        tracker,
        close: async () => {
          rpc.close();
          await signer.close();
        },
      };
    });

  it("broadcasts a stored transaction once when two trackers claim it at the same instant", async () => {
    // Stored as the outbox stores what it signed, its lease run out: due for both trackers.
    const sender = newAccount();
    await fund(stack.devnet.url, sender.address, usdc(1n));
    const rawTx = await sender.signTransaction({
      chainId: CHAIN_ID,
      type: "eip1559",
      to: newAccount().address,
      value: 1n,
      nonce: 0,
      gas: 21_000n,
      maxFeePerGas: 3_000_000_000n,
      maxPriorityFeePerGas: 1_000_000_000n,
    });
    const txHash = keccak256(rawTx);
    const [{ tx_id: txId }] = (await queryRows<{ tx_id: string }>(
      stack.db.handle.db,
      sql`insert into outgoing_transactions
          (purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei, broadcast_lease_until, updated_at)
          values ('transfer', ${sender.address.toLowerCase()}, 0, ${txHash}, ${rawTx}, '63000000000001',
                  now() - interval '1 second', now() - interval '1 second')
          returning tx_id`,
    )) as [{ tx_id: string }];
    // Both trackers found it due; each now claims it to send it (the tracker's step, with each one's
    // own chain client). The first broadcast is held on its way for a moment, so the other claim
    // comes while it is.
    const held = proxy.beforeNextSend(() => sleep(500));
    const clients = [0, 1].map(() => createJsonRpcUpstream({ url: proxy.url, timeoutMs: 5_000 }));
    const store = createOutboxStore(OUTBOX_DOMAINS.followers);
    try {
      const claims = await Promise.all(
        clients.map((rpc) =>
          broadcastStored({ db: stack.db.handle.db, rpc, store }, txId, { leaseMs: 10_000 }),
        ),
      );
      await held;
      expect(claims.filter((outcome) => outcome !== undefined)).toEqual([{ kind: "accepted" }]);
    } finally {
      for (const rpc of clients) rpc.close();
    }
    // Mutation: claimBroadcast without its lease condition lets the second tracker send it too.
    expect(proxy.sent.filter((tx) => tx.hash === txHash)).toHaveLength(1);
    expect(await publicClientFor(stack.devnet.url).getTransactionCount({ address: sender.address })).toBe(1);
  }, 60_000);

  it("asks the enclave for one filler when two trackers find the same stuck transaction at the same instant", async () => {
    // Its own tracker never sweeps (a broadcast wakes it, but only to read receipts): the two
    // trackers below are the ones that find the stuck transfer.
    const origin = await stack.startOrigin({}, { periodMs: 3_600_000, sweepMs: 3_600_000 }, proxy.url);
    const agent = await stack.newAgent({ units: 1_000_000n });
    const wallet = agent.wallet.toLowerCase();
    const refusing = proxy.refuseEvery((tx: SentTransaction) => tx.from === wallet && tx.to !== wallet);
    const trackers = twoTrackers();
    try {
      const answer = await agentCalls(origin.base, agent.token).transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "1000",
      });
      expect(answer.status, JSON.stringify(answer.body)).toBe(202);
      await refusing.first;
      // Recorded in flight, refused: due for a filler at once.
      await expect
        .poll(() =>
          queryRows<{ broadcast_outcome: string | null }>(
            stack.db.handle.db,
            sql`select broadcast_outcome from outgoing_transactions where sender = ${wallet}`,
          ),
        )
        .toEqual([{ broadcast_outcome: "refused" }]);
      const before = signFillerAnswers;
      await Promise.all(trackers.map(({ tracker }) => tracker.tick()));
      // Mutation: the filler kind's claim (fillers.ts fillerClaimStatement) without its lock of the
      // stuck transaction has the second tracker claim it too and ask the enclave again (which
      // refuses it: one filler per nonce), two answers.
      expect(signFillerAnswers - before).toBe(1);
      const rows = await queryRows<{ purpose: string }>(
        stack.db.handle.db,
        sql`select purpose from outgoing_transactions where sender = ${wallet} order by created_at`,
      );
      expect(rows.map((row) => row.purpose)).toEqual(["transfer", "filler"]);
      // Once the filler is mined, a tick records it and ends the transfer it replaced (the devnet
      // mines it a moment after the broadcast, later than the next tick on a loaded machine).
      const actionId = (answer.body as ActionView).action_id;
      await expect
        .poll(async () => {
          await trackers[0]!.tracker.tick();
          return (await agentCalls(origin.base, agent.token).action(actionId)).body as ActionView;
        })
        .toMatchObject({ status: "failed", error_code: "broadcast_refused" });
    } finally {
      refusing.stop();
      await Promise.all(trackers.map(({ close }) => close()));
      await origin.close();
    }
  }, 90_000);
});
