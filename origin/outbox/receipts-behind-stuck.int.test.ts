import { sql } from "drizzle-orm";
import { keccak256 } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount } from "../../devnet/testing.ts";
import { CHAIN_ID } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import { startRpcRefusalProxy } from "../../testing/rpc-refusal-proxy.ts";
import { useFixture, useMoneyStack } from "../../testing/stack.ts";
import { createFeeOracle } from "../chain/fees.ts";
import { createJsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { OUTBOX_DOMAINS } from "../compose.ts";
import { queryRows } from "../db/client.ts";
import { createLogger } from "../logger.ts";
import { createSignerClient } from "../signer/create-signer-client.ts";
import { createOutbox } from "./outbox.ts";

// The tracker reads the receipts of submitted transactions a batch at a time (batchSize, 500 by
// default). Transactions that stay unmined at the front of that order (stuck ones, under a base
// fee no filler can meet, across many wallets) must not hide the ones behind them: a transfer the
// chain mined, whose receipt the lane could not read right after its broadcast, is confirmed by the
// tracker whatever waits before it. Here the batch is one transaction, and one stuck transaction
// stands before the transfer. Real processes; the pass-through answers the transfer's broadcast
// as a node that had mined it and lags does ("nonce too low", its receipt hidden from the lane).

describe("receipts behind transactions that stay unmined (real processes)", () => {
  const stack = useMoneyStack({ tracker: { periodMs: 3_600_000 } }, { timeoutMs: 120_000 });
  const proxy = useFixture(
    "lying pass-through",
    () => startRpcRefusalProxy(stack.devnet.url),
    (lying) => lying.close(),
    { timeoutMs: 120_000 },
  );

  it("confirms a mined transfer though a transaction older than it stays unmined and the tracker reads one receipt a batch", async () => {
    // Mutation: every read starting from the oldest submitted transaction (the code before) reads
    // the stuck one again and again, and the transfer stays submitted for good.
    const db = stack.db.handle.db;
    // Stuck: an unfunded sender's transaction, stored as the outbox stores what it signed, sent a
    // minute ago and accepted; not due to be sent again, nor replaced, during the test.
    const stuckSender = newAccount();
    const rawTx = await stuckSender.signTransaction({
      chainId: CHAIN_ID,
      type: "eip1559",
      to: newAccount().address,
      value: 1n,
      nonce: 0,
      gas: 21_000n,
      maxFeePerGas: 3_000_000_000n,
      maxPriorityFeePerGas: 1_000_000_000n,
    });
    await queryRows(
      db,
      sql`insert into outgoing_transactions
          (purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei, status, broadcast_outcome,
           broadcast_attempts, created_at, updated_at)
          values ('transfer', ${stuckSender.address.toLowerCase()}, 0, ${keccak256(rawTx)}, ${rawTx},
                  '63000000000001', 'submitted', 'accepted', 1, now() - interval '1 minute',
                  now() - interval '1 minute')`,
    );
    // The origin's own tracker never sweeps and reads receipts through the liar, which hides the
    // transfer's: the tracker below, on the devnet directly, is the one that can confirm it.
    const origin = await stack.startOrigin({}, { periodMs: 3_600_000, sweepMs: 3_600_000 }, proxy.url);
    const rpc = createJsonRpcUpstream({ url: stack.devnet.url, timeoutMs: 5_000 });
    const signer = createSignerClient({
      endpoint: `unix://${stack.enclave.socketPath}`,
      liveIdentityEnabled: true,
    });
    const { tracker } = createOutbox(
      {
        db,
        rpc,
        logger: createLogger("silent"),
        signer,
        fees: createFeeOracle({ rpc, feeCeilingWei: stack.policy.feeCeilingWei }),
        serviceKeys: new Map(),
        chainTimeoutMs: 5_000,
        maxWaiting: 128,
        tracker: { batchSize: 1, signedGraceMs: 3_600_000, resendAfterMs: 3_600_000 },
      },
      OUTBOX_DOMAINS,
    );
    try {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const lied = proxy.lieOnce((tx) => tx.from === agent.wallet.toLowerCase(), "lagging", 60_000);
      const calls = agentCalls(origin.base, agent.token);
      const answer = await calls.transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "1000",
      });
      expect(answer.status, JSON.stringify(answer.body)).toBe(202);
      await lied;
      const actionId = (answer.body as ActionView).action_id;
      await expect
        .poll(async () => ((await calls.action(actionId)).body as ActionView).status)
        .toBe("submitted");
      for (let tick = 0; tick < 4; tick++) await tracker.tick();
      expect(((await calls.action(actionId)).body as ActionView).status).toBe("confirmed");
      // The stuck one is still read, and still in flight.
      expect(
        await queryRows(
          db,
          sql`select status from outgoing_transactions where sender = ${stuckSender.address.toLowerCase()}`,
        ),
      ).toEqual([{ status: "submitted" }]);
    } finally {
      await tracker.stop();
      rpc.close();
      await signer.close();
      await origin.close();
    }
  }, 90_000);
});
