import { sql } from "drizzle-orm";
import { type Address, keccak256 } from "viem";
import { describe, expect, it } from "vitest";
import { fund, newAccount, publicClientFor, usdc } from "../../devnet/testing.ts";
import { CHAIN_ID } from "../../shared/constants.ts";
import { createTestDatabase } from "../../testing/database.ts";
import { freePort } from "../../testing/free-port.ts";
import { useDevnet, useFixture } from "../../testing/stack.ts";
import { createJsonRpcUpstream, type JsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { queryRows } from "../db/client.ts";
import { createLogger } from "../logger.ts";
import type { BroadcastLease } from "./intent.ts";
import { type BroadcastLane, createBroadcastLane } from "./lane.ts";
import { createOutboxStore } from "./store.ts";

// The lane against a real devnet and a real database: stored transactions (signed here by a test
// account, as the enclave would sign an agent's) go out in order, what queues while a broadcast is
// on its way goes out together, and signing is held back while the chain has enough waiting.

describe("broadcast lane (real devnet and Postgres)", () => {
  const devnet = useDevnet();
  const database = useFixture(
    "database",
    () => createTestDatabase(),
    (test) => test.drop(),
  );
  const rpc = useFixture(
    "JSON-RPC upstream",
    async () => createJsonRpcUpstream({ url: devnet.url, timeoutMs: 5_000 }),
    async (upstream) => upstream.close(),
  );
  const chain = () => publicClientFor(devnet.url);
  // No domain rows follow these transactions.
  const store = createOutboxStore([]);

  const laneWith = (options: { maxWaiting: number; rpc?: JsonRpcUpstream; onInFlight?: () => void }) =>
    createBroadcastLane({
      db: database.handle.db,
      rpc: options.rpc ?? rpc,
      store,
      logger: createLogger("silent"),
      onInFlight: options.onInFlight,
      context: "test lane",
      maxWaiting: options.maxWaiting,
    });

  /** `count` transfers from a fresh funded account, nonces 0…, each stored `signed` under a lease. */
  async function storedTransfers(count: number): Promise<{ sender: Address; leases: BroadcastLease[] }> {
    const sender = newAccount();
    await fund(devnet.url, sender.address, usdc(1_000n));
    const to = newAccount().address;
    const leases: BroadcastLease[] = [];
    for (let nonce = 0; nonce < count; nonce++) {
      const rawTx = await sender.signTransaction({
        chainId: CHAIN_ID,
        type: "eip1559",
        to,
        value: 1_000n,
        nonce,
        gas: 21_000n,
        maxFeePerGas: 3_000_000_000n,
        maxPriorityFeePerGas: 1_000_000_000n,
      });
      // Stored as the outbox stores what it signed: `signed`, under a broadcast lease.
      const txHash = keccak256(rawTx);
      const [row] = await queryRows<{ tx_id: string }>(
        database.handle.db,
        sql`insert into outgoing_transactions (purpose, sender, nonce, tx_hash, raw_tx, max_cost_wei, broadcast_lease_until)
            values ('transfer', ${sender.address.toLowerCase()}, ${nonce}, ${txHash}, ${rawTx},
                    ${(1_000n + 21_000n * 3_000_000_000n).toString()}, now() + interval '60 seconds')
            returning tx_id`,
      );
      leases.push({ txId: row!.tx_id, rawTx, txHash, status: "signed" });
    }
    return { sender: sender.address, leases };
  }

  const statuses = async (leases: BroadcastLease[]) =>
    (
      await queryRows<{ status: string }>(
        database.handle.db,
        sql`select status from outgoing_transactions
            where tx_id = any(${`{${leases.map((lease) => lease.txId).join(",")}}`}::uuid[]) order by nonce`,
      )
    ).map((row) => row.status);

  it("sends what queued while a broadcast was on its way in one batch after it, in order, and records the receipts", async () => {
    const lane = laneWith({ maxWaiting: 100 });
    const { leases } = await storedTransfers(6);
    lane.send(leases.slice(0, 1));
    // Queued while the first is on its way: they leave together once the chain has taken it.
    lane.send(leases.slice(1, 3));
    lane.send(leases.slice(3));
    await lane.idle();

    expect(await statuses(leases)).toEqual(Array(6).fill("confirmed"));
    const receipts = await Promise.all(
      leases.map((lease) => chain().getTransactionReceipt({ hash: lease.txHash as `0x${string}` })),
    );
    const blocks = receipts.map((receipt) => receipt.blockNumber);
    expect(blocks.slice(1)).toEqual(Array(5).fill(blocks[1]));
    expect(blocks[1]).toBeGreaterThan(blocks[0]!);
    expect(receipts.slice(1).map((receipt) => receipt.transactionIndex)).toEqual([0, 1, 2, 3, 4]);
  });

  it("gives each transaction back how the chain took its broadcast and the receipt read right after it; none when the chain was out of reach", async () => {
    const lane = laneWith({ maxWaiting: 100 });
    const { leases } = await storedTransfers(2);
    const sent = await Promise.all(lane.send(leases));
    expect(sent.map((item) => item.outcome.kind)).toEqual(["accepted", "accepted"]);
    const receipts = await Promise.all(sent.map((item) => item.receipt));
    const onChain = await Promise.all(
      leases.map((lease) => chain().getTransactionReceipt({ hash: lease.txHash as `0x${string}` })),
    );
    expect(receipts.map((receipt) => receipt?.status)).toEqual(["confirmed", "confirmed"]);
    expect(receipts.map((receipt) => receipt?.blockNumber)).toEqual(
      onChain.map((receipt) => receipt.blockNumber),
    );

    const closed = createJsonRpcUpstream({ url: `http://127.0.0.1:${await freePort()}`, timeoutMs: 1_000 });
    const unreachable = laneWith({ maxWaiting: 100, rpc: closed });
    const stranded = await storedTransfers(1);
    const [answer] = await Promise.all(unreachable.send(stranded.leases));
    closed.close();
    expect(answer!.outcome).toEqual({ kind: "unknown", reason: "chain unreachable" });
    expect(await answer!.receipt).toBeUndefined();
  });

  it("holds room() while maxWaiting transactions wait for the chain, and frees it once the chain took them", async () => {
    const lane: BroadcastLane = laneWith({ maxWaiting: 3 });
    const { sender, leases } = await storedTransfers(3);
    lane.send(leases);
    let roomy = false;
    const room = lane.room().then(() => {
      roomy = true;
    });
    // The broadcast needs the devnet's answer, more than a turn of this event loop.
    await new Promise((resolve) => setImmediate(resolve));
    expect(roomy).toBe(false);
    await room;
    expect(await chain().getTransactionCount({ address: sender })).toBe(3);
  });

  it("leaves what the chain did not answer in flight, `submitted` with the failure's words, and wakes the tracker", async () => {
    const closed = createJsonRpcUpstream({ url: `http://127.0.0.1:${await freePort()}`, timeoutMs: 1_000 });
    let woken = 0;
    const lane = laneWith({ maxWaiting: 100, rpc: closed, onInFlight: () => woken++ });
    const { sender, leases } = await storedTransfers(2);
    lane.send(leases);
    await lane.idle();
    closed.close();
    // The request may have reached a node before the failure: unknown, never ended, nonce kept.
    expect(await statuses(leases)).toEqual(["submitted", "submitted"]);
    expect(woken).toBeGreaterThan(0);
    expect(await chain().getTransactionCount({ address: sender })).toBe(0);
  });

  it("never moves a transaction that has ended: a broadcast's answer recorded after its receipt leaves it confirmed", async () => {
    // A tracker's resend answered "nonce too low" while another origin recorded the receipt: the
    // late answer must not move the row back in flight. Mutation: moveInFlight without its
    // `status in ('signed', 'submitted')` condition leaves it `submitted`.
    const lane = laneWith({ maxWaiting: 100 });
    const { leases } = await storedTransfers(1);
    const [sent] = await Promise.all(lane.send(leases));
    expect((await sent!.receipt)?.status).toBe("confirmed");
    await lane.idle();
    expect(await statuses(leases)).toEqual(["confirmed"]);
    await store.recordBroadcasts(database.handle.db, leases, [
      { kind: "unknown", reason: "nonce too low: next nonce 1, tx nonce 0" },
    ]);
    await store.failInFlight(database.handle.db, [{ txId: leases[0]!.txId, error: "a late decision" }]);
    expect(await statuses(leases)).toEqual(["confirmed"]);
  });
});
