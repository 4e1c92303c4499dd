import { sql } from "drizzle-orm";
import { type Address, getAddress } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { DEV_OPERATOR_POOL_ADDRESS } from "../../devnet/index.ts";
import { fund, newAccount, publicClientFor, setNextBaseFee } from "../../devnet/testing.ts";
import { NATIVE_TRANSFER_AUTH_ADDRESS, WEI_PER_UNIT } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import { holdLock } from "../../testing/held-lock.ts";
import type { TestResponse } from "../../testing/http.ts";
import { blockedBy } from "../../testing/lock-waiters.ts";
import { agentCalls, isAccepted, newKey } from "../../testing/money-client.ts";
import type { StackAgent } from "../../testing/money-stack.ts";
import { parsePrometheusText } from "../../testing/prometheus.ts";
import { deployRevertingContract } from "../../testing/reverting-contract.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { requestHash } from "../agent-actions/repository.ts";
import { queryRows } from "../db/client.ts";

// POST /agent/v1/transfers against the real stack (origin, enclave, devnet, Postgres): what an
// agent sees, what lands on chain, and what the database records.

describe("transfers (real stack)", () => {
  // Per-transaction 10 USDC, daily 50 USDC (the stack's policy, sealed in the enclave).
  const stack = useMoneyStack();
  let chain: ReturnType<typeof publicClientFor>;

  beforeAll(async () => {
    chain = publicClientFor(stack.devnet.url);
  });

  const count = async (table: "agent_actions" | "outgoing_transactions"): Promise<number> => {
    const [row] = await queryRows<{ n: number }>(
      stack.db.handle.db,
      sql.raw(`select count(*)::int as n from ${table}`),
    );
    return row!.n;
  };
  const balance = (address: Address) => chain.getBalance({ address });

  /** The money batches this origin began, and the items they carried (origin_outbox_batch_items). */
  const moneyBatches = async (): Promise<{ batches: number; items: number }> => {
    const metrics = parsePrometheusText(await stack.origin.deps.metrics.render());
    return {
      batches: metrics.value("origin_outbox_batch_items_count", { kind: "money" }) ?? 0,
      items: metrics.value("origin_outbox_batch_items_sum", { kind: "money" }) ?? 0,
    };
  };

  /**
   * Until the two transfers sent since `before` are in money batches and every such batch waits at
   * the nonce row `holder` holds (outbox/submit.ts lockStatement): a batch counts from its start,
   * before its round trip to Postgres, so both counts are needed.
   */
  const untilBothAtTheNonceRow = async (holder: number, before: { batches: number; items: number }) => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const now = await moneyBatches();
      const batches = now.batches - before.batches;
      const items = now.items - before.items;
      const waiting = await blockedBy(stack.db.handle.db, { holder, statement: "insert into sender_nonces" });
      if (items >= 2 && waiting >= batches) return;
      if (Date.now() > deadline) {
        throw new Error(
          `never: both transfers in batches waiting at the nonce row (${items} items in ${batches} batches, ${waiting} waiting)`,
        );
      }
      await sleep(50);
    }
  };

  it("moves exactly the amount to the recipient and the amount plus the fee out of the sender", async () => {
    const agent = await stack.newAgent({ units: 20_000_000n });
    const calls = agentCalls(stack.origin.base, agent.token);
    const recipient = newAccount().address;
    const senderBefore = await balance(agent.wallet);
    const body = { idempotency_key: newKey(), to: recipient, amount: "1500000" };
    const response = await calls.transfer(body);
    // Answered once signed and stored (202 in flight, docs/api.md), with the hash it will have on
    // chain; the broadcast follows, and GET /actions/{id} reads the action to `confirmed`.
    expect(response.status).toBe(202);
    const accepted = response.body as ActionView;
    expect(accepted).toMatchObject({
      kind: "transfer",
      status: "signed",
      amount: "1500000",
      to: recipient.toLowerCase(),
      tx_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
      fee_wei: null,
    });
    // The 202 is the row as the statement that stored the transaction returned it: its
    // updated_at is that statement's clock, which it wrote as signed_at too, not the time the
    // answer was built.
    const [stored] = await queryRows<{ signed_at: Date }>(
      stack.db.handle.db,
      sql`select signed_at from agent_actions where action_id = ${accepted.action_id}`,
    );
    expect(accepted.updated_at).toBe(new Date(stored!.signed_at).toISOString());
    const done = await calls.settled(accepted.action_id);
    const { updated_at: _answeredAt, ...sameFields } = accepted;
    expect(done).toMatchObject({ ...sameFields, status: "confirmed", fee_wei: expect.any(String) });
    const receipt = await chain.getTransactionReceipt({ hash: accepted.tx_hash as `0x${string}` });
    const fee = receipt.gasUsed * receipt.effectiveGasPrice;
    expect(done.fee_wei).toBe(fee.toString());
    expect(await balance(recipient)).toBe(1_500_000n * WEI_PER_UNIT);
    expect(senderBefore - (await balance(agent.wallet))).toBe(1_500_000n * WEI_PER_UNIT + fee);
    // A repeat with the same key and payload answers the stored action, 200 now that it is terminal.
    const again = await calls.transfer(body);
    expect(again.status).toBe(200);
    expect(again.body).toEqual(done);
  });

  it("answers 400 to bad input and writes nothing", async () => {
    const agent = await stack.newAgent();
    const calls = agentCalls(stack.origin.base, agent.token);
    const to = newAccount().address;
    // The checksummed address with the case of its first letter flipped: still hex, wrong EIP-55.
    const letter = to.slice(2).search(/[a-fA-F]/) + 2;
    const flipped =
      to[letter] === to[letter]!.toUpperCase() ? to[letter]!.toLowerCase() : to[letter]!.toUpperCase();
    const badChecksum = `${to.slice(0, letter)}${flipped}${to.slice(letter + 1)}`;
    const cases: Array<[string, unknown]> = [
      ["amount 0", { idempotency_key: newKey(), to, amount: "0" }],
      ["amount -1", { idempotency_key: newKey(), to, amount: "-1" }],
      ["amount 1.5", { idempotency_key: newKey(), to, amount: "1.5" }],
      ["amount 1e6", { idempotency_key: newKey(), to, amount: "1e6" }],
      ["amount with a space", { idempotency_key: newKey(), to, amount: " 1" }],
      ["amount in hex", { idempotency_key: newKey(), to, amount: "0x10" }],
      ["amount as a number", { idempotency_key: newKey(), to, amount: 1 }],
      ["amount 2^256", { idempotency_key: newKey(), to, amount: (2n ** 256n).toString() }],
      ["to not an address", { idempotency_key: newKey(), to: "0x1234", amount: "1" }],
      ["to with a bad checksum", { idempotency_key: newKey(), to: badChecksum, amount: "1" }],
      ["to the operator pool", { idempotency_key: newKey(), to: DEV_OPERATOR_POOL_ADDRESS, amount: "1" }],
      // Mutation: dropping the zero-address check in transfers.ts fails this (the empty wallet's
      // transfer is claimed and refused 422 insufficient_funds, an action written).
      ["to the zero address", { idempotency_key: newKey(), to: `0x${"0".repeat(40)}`, amount: "1" }],
      // Mutation: dropping the precompile check in transfers.ts fails this the same way (an action
      // written, refused 422 insufficient_funds); a funded wallet would pay a reverted transfer's fee.
      [
        "to the NativeTransferAuth precompile",
        { idempotency_key: newKey(), to: NATIVE_TRANSFER_AUTH_ADDRESS, amount: "1" },
      ],
      ["no idempotency key", { to, amount: "1" }],
      ["empty idempotency key", { idempotency_key: "", to, amount: "1" }],
      ["300-character idempotency key", { idempotency_key: "k".repeat(300), to, amount: "1" }],
      ["an unknown field", { idempotency_key: newKey(), to, amount: "1", memo: "hi" }],
      ["a body that is not JSON", "{not json"],
      ["a JSON array", "[]"],
    ];
    const actionsBefore = await count("agent_actions");
    const txsBefore = await count("outgoing_transactions");
    for (const [name, body] of cases) {
      const response = await calls.transfer(body as Record<string, unknown>);
      expect({
        name,
        status: response.status,
        code: (response.body as { error?: { code?: string } }).error?.code,
      }).toEqual({
        name,
        status: 400,
        code: "validation_failed",
      });
    }
    // What `to` must be, in words: zod's own message quoted its pattern (/^0x[0-9a-fA-F]{40}$/).
    const told = async (body: Record<string, unknown>) =>
      ((await calls.transfer(body)).body as { error: { message: string } }).error.message;
    expect(await told({ idempotency_key: newKey(), to: to.slice(2), amount: "1" })).toBe(
      "to: must be a 20-byte address: 0x and 40 hex digits",
    );
    expect(await told({ idempotency_key: newKey(), to: badChecksum, amount: "1" })).toBe(
      "to: mixes upper and lower case but is not its EIP-55 checksum (send it checksummed or all lower case)",
    );
    expect(await count("agent_actions")).toBe(actionsBefore);
    expect(await count("outgoing_transactions")).toBe(txsBefore);
  });

  it("answers 400 to a precompile's address (0x…01 ecrecover, 0x…0a, 0x…ff) and moves nothing: no key can ever spend what is sent there", async () => {
    // A funded wallet: without the check the transfer is signed, mined with status 0x1 (a
    // precompile takes value as any account does) and the amount is gone for good.
    const agent = await stack.newAgent({ units: 5_000_000n });
    const calls = agentCalls(stack.origin.base, agent.token);
    const before = await balance(agent.wallet);
    const actionsBefore = await count("agent_actions");
    for (const low of ["01", "0a", "ff"]) {
      const to = `0x${"0".repeat(38)}${low}` as Address;
      const response = await calls.transfer({ idempotency_key: newKey(), to, amount: "1000000" });
      expect({ to, status: response.status, body: response.body }).toMatchObject({
        to,
        status: 400,
        body: { error: { code: "validation_failed", message: expect.stringContaining("precompile") } },
      });
      expect(await balance(to)).toBe(0n);
    }
    expect(await balance(agent.wallet)).toBe(before);
    expect(await count("agent_actions")).toBe(actionsBefore);
  });

  it("answers a repeat of a key an earlier release recorded for a transfer to a precompile's address with that action, never the 400 that reads as nothing sent", async () => {
    // A row as an origin of the release before this refusal wrote it, taken (here refused by the
    // chain) while origins restart one by one: this release cannot write one, so it is inserted.
    // Mutation: refusing the recipient before looking the key up answers 400 validation_failed.
    const agent = await stack.newAgent({ units: 1_000_000n });
    const to = `0x${"0".repeat(38)}01`;
    const body = { idempotency_key: newKey(), to, amount: "1000" };
    const [row] = await queryRows<{ action_id: string }>(
      stack.db.handle.db,
      sql`insert into agent_actions (agent_id, kind, idempotency_key, request_hash, amount_units, to_address,
            status, error_code, error_message)
          values (${agent.agentId}, 'transfer', ${body.idempotency_key},
            ${requestHash("transfer", { to, amount: body.amount })}, 1000, ${to}, 'failed',
            'broadcast_refused', 'the chain refused the signed transaction')
          returning action_id`,
    );
    const calls = agentCalls(stack.origin.base, agent.token);
    const repeat = await calls.transfer(body);
    expect(repeat.status, JSON.stringify(repeat.body)).toBe(422);
    expect(repeat.body).toMatchObject({ error: { code: "broadcast_refused", action_id: row!.action_id } });
    // A new key to the same address is refused before anything is written.
    expect((await calls.transfer({ ...body, idempotency_key: newKey() })).status).toBe(400);
  });

  it("the policy check denies, by the node's rule node.recipient, each recipient the transfer refuses 400, whatever the policy; it allows another", async () => {
    // Mutation: without the node's rule in the check, each answers allow, and the transfer 400.
    const agent = await stack.newAgent({ units: 5_000_000n });
    const calls = agentCalls(stack.origin.base, agent.token);
    const refused = [
      `0x${"0".repeat(40)}`,
      `0x${"0".repeat(38)}01`,
      `0x${"0".repeat(38)}ff`,
      NATIVE_TRANSFER_AUTH_ADDRESS,
      DEV_OPERATOR_POOL_ADDRESS,
    ];
    for (const to of refused) {
      const checked = await calls.checkTransfer({ to, amount: "1000" });
      expect({ to, status: checked.status, body: checked.body }).toEqual({
        to,
        status: 200,
        body: { decision: "deny", rule: "node.recipient", remaining: "0" },
      });
      expect((await calls.transfer({ idempotency_key: newKey(), to, amount: "1000" })).status, to).toBe(400);
    }
    expect((await calls.checkTransfer({ to: newAccount().address, amount: "1000" })).body).toEqual({
      decision: "allow",
      rule: null,
      remaining: null,
    });
  });

  it("signs one transaction for 50 concurrent identical requests, and answers 409 to the key with another amount or another recipient", async () => {
    const agent = await stack.newAgent({ units: 5_000_000n });
    const calls = agentCalls(stack.origin.base, agent.token);
    const body = { idempotency_key: newKey(), to: newAccount().address, amount: "1000" };
    const responses = await Promise.all(Array.from({ length: 50 }, () => calls.transfer(body)));
    const ids = new Set(responses.map((response) => (response.body as ActionView).action_id));
    expect(
      responses.map((response) => response.status).every((status) => status === 202 || status === 200),
    ).toBe(true);
    expect(ids.size).toBe(1);
    const [actionId] = ids;
    expect((await calls.settled(actionId!)).status).toBe("confirmed");
    const txs = await queryRows<{ n: number }>(
      stack.db.handle.db,
      sql`select count(*)::int as n from outgoing_transactions where sender = ${agent.wallet.toLowerCase()}`,
    );
    expect(txs[0]!.n).toBe(1);
    expect(await chain.getTransactionCount({ address: agent.wallet })).toBe(1);

    const conflict = await calls.transfer({ ...body, amount: "1001" });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ error: { code: "idempotency_conflict", action_id: actionId } });
    // The key binds the recipient too. Mutation: a request hash without `to` answers this 200,
    // the earlier transfer to someone else.
    const elsewhere = await calls.transfer({ ...body, to: newAccount().address });
    expect(elsewhere.status).toBe(409);
    expect(elsewhere.body).toMatchObject({ error: { code: "idempotency_conflict", action_id: actionId } });
    const repeat = await calls.transfer(body);
    expect(repeat.status).toBe(200);
    expect(repeat.body).toMatchObject({ action_id: actionId, status: "confirmed" });
  });

  it("signs exactly one of two concurrent transfers that together exceed the daily limit", async () => {
    // Daily 50 USDC: two of 30 USDC each fit the per-transaction limit... not with 10 USDC per
    // transaction, so the day is filled first with four of 10 USDC (less their fees), then two
    // of 9 USDC race for what remains.
    const agent = await stack.newAgent({ units: 100_000_000n });
    const calls = agentCalls(stack.origin.base, agent.token);
    const to = newAccount().address;
    for (let i = 0; i < 4; i++) {
      const response = await calls.transfer({ idempotency_key: newKey(), to, amount: "9990000" });
      expect(isAccepted(response)).toBe(true);
    }
    // Both arrive while the wallet's nonce row is held elsewhere, and the row is let go only once
    // both are in batches waiting for it (one batch of two, or two of one: the outbox decides),
    // so both are inside their transactions at once when it is released: the race is real, not
    // left to timing. The wait reads the metrics and pg_stat_activity and locks nothing: a lock of
    // the test's on the actions would have the claim's `for update skip locked` pass them over.
    const before = await moneyBatches();
    const nonceRow = await holdLock(
      stack.db.handle.db,
      sql`select 1 from sender_nonces where address = ${agent.wallet.toLowerCase()} for update`,
    );
    const sent = Promise.all(
      [1, 2].map(() => calls.transfer({ idempotency_key: newKey(), to, amount: "6000000" })),
    );
    await untilBothAtTheNonceRow(nonceRow.pid, before);
    await nonceRow.release();
    const racing = await sent;
    const statuses = racing.map((response) => (response.status === 200 ? 202 : response.status)).sort();
    expect(statuses).toEqual([202, 403]);
    const refused = racing.find((response) => response.status === 403)!;
    // Refused by the gateway's own count under the sender's lock (with what remains), not left to
    // the enclave's re-check.
    expect(refused.body).toMatchObject({
      error: {
        code: "limit_exceeded",
        limit: "daily",
        limit_units: "50000000",
        remaining_units: expect.stringMatching(/^\d+$/),
        message: expect.stringContaining("over what remains of today's limit"),
      },
    });
    const [signed] = await queryRows<{ n: number }>(
      stack.db.handle.db,
      sql`select count(*)::int as n from agent_actions where agent_id = ${agent.agentId} and signed_at is not null`,
    );
    expect(signed!.n).toBe(5);
  });

  it("confirms 20 concurrent transfers from one wallet with contiguous nonces, none stuck", async () => {
    const agent = await stack.newAgent({ units: 10_000_000n });
    const calls = agentCalls(stack.origin.base, agent.token);
    const to = newAccount().address;
    const responses = await Promise.all(
      Array.from({ length: 20 }, () => calls.transfer({ idempotency_key: newKey(), to, amount: "1000" })),
    );
    expect(responses.every(isAccepted)).toBe(true);
    const done = await Promise.all(
      responses.map((response) => calls.settled((response.body as ActionView).action_id)),
    );
    expect(done.map((action) => action.status)).toEqual(Array(20).fill("confirmed"));
    const nonces = await Promise.all(
      done.map(
        async (action) => (await chain.getTransaction({ hash: action.tx_hash as `0x${string}` })).nonce,
      ),
    );
    expect(nonces.sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    expect(await balance(to)).toBe(20_000n * WEI_PER_UNIT);
  });

  it("refuses what the limits, the balance and the capabilities do not allow", async () => {
    const reader = await stack.newAgent({ capabilities: ["read"], units: 1_000_000n });
    const poor = await stack.newAgent({ units: 1_000n });
    const to = newAccount().address;
    const asReader = agentCalls(stack.origin.base, reader.token);
    const denied = await asReader.transfer({ idempotency_key: newKey(), to, amount: "1" });
    expect(denied.status).toBe(403);
    expect(denied.body).toMatchObject({ error: { code: "agent_capability_required" } });

    // An agent rich enough to pay it: only the limit stands in the way. Mutation: a node check
    // looser than the limit lets the enclave refuse it instead, without the node's figures.
    const rich = await stack.newAgent({ units: 20_000_000n });
    const overLimit = await agentCalls(stack.origin.base, rich.token).transfer({
      idempotency_key: newKey(),
      to,
      amount: "10000000",
    });
    expect(overLimit.status).toBe(403);
    expect(overLimit.body).toMatchObject({
      error: {
        code: "limit_exceeded",
        limit: "per_transaction",
        limit_units: "10000000",
        message: expect.stringMatching(/is over the per-transaction limit of 10000000 units$/),
      },
    });
    const asPoor = agentCalls(stack.origin.base, poor.token);
    // 1000 units of balance cannot pay 1000 units plus a fee. The refusal's figures are in the
    // units the request's amount is in (the need rounded up, as the limits count it), the exact
    // wei beside them. Mutation: answering the wei figures alone (no needed_units and
    // available_units) fails this.
    const broke = await asPoor.transfer({ idempotency_key: newKey(), to, amount: "1000" });
    expect(broke.status).toBe(422);
    const refusal = (broke.body as { error: Record<string, string> }).error;
    expect(refusal).toMatchObject({
      code: "insufficient_funds",
      available_units: "1000",
      available_wei: (1_000n * WEI_PER_UNIT).toString(),
      needed_units: expect.stringMatching(/^[0-9]+$/),
      needed_wei: expect.stringMatching(/^[0-9]+$/),
    });
    const neededWei = BigInt(refusal.needed_wei!);
    expect(BigInt(refusal.needed_units!)).toBe((neededWei + WEI_PER_UNIT - 1n) / WEI_PER_UNIT);
    expect(BigInt(refusal.needed_units!)).toBeGreaterThan(1_000n);
    expect(refusal.message).toContain(`needs ${refusal.needed_units} units and has 1000 available`);
    expect(await balance(to)).toBe(0n);
  });

  it("answers a repeat of a refused or reverted transfer with the refusal it ended with, never 200", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const calls = agentCalls(stack.origin.base, agent.token);
    const to = newAccount().address;
    const over = { idempotency_key: newKey(), to, amount: "10000001" };
    const first = await calls.transfer(over);
    expect(first.status).toBe(403);
    const refusal = (first.body as { error: Record<string, unknown> }).error;
    expect(refusal).toMatchObject({ code: "limit_exceeded", action_id: expect.any(String) });
    const repeat = await calls.transfer(over);
    expect(repeat.status).toBe(403);
    expect(repeat.body).toMatchObject({
      error: { code: "limit_exceeded", message: refusal.message, action_id: refusal.action_id },
    });

    // A transfer the chain mines and reverts (to a contract whose code is INVALID): accepted in
    // flight, then final for its key, the fee paid and the amount kept.
    const contract = await deployRevertingContract(stack.devnet.url);
    const reverting = { idempotency_key: newKey(), to: contract, amount: "1000" };
    const before = await balance(agent.wallet);
    const accepted = await calls.transfer(reverting);
    expect(accepted.status).toBe(202);
    const action = accepted.body as ActionView;
    const ended = await calls.settled(action.action_id);
    expect(ended.status).toBe("reverted");
    expect(BigInt(ended.fee_wei!)).toBeGreaterThan(0n);
    expect(before - (await balance(agent.wallet))).toBe(BigInt(ended.fee_wei!));
    expect(await balance(contract)).toBe(0n);
    const after = await calls.transfer(reverting);
    expect(after.status).toBe(422);
    expect(after.body).toMatchObject({
      error: { code: "reverted", action_id: action.action_id, tx_hash: action.tx_hash },
    });
    expect(await chain.getTransactionCount({ address: agent.wallet })).toBe(1);
  });

  /** The error object as sent, its keys in their order, the request id put in place. */
  const errorText = (response: TestResponse): string =>
    JSON.stringify({ ...(response.body as { error: Record<string, unknown> }).error, request_id: "" });
  const errorOf = (response: TestResponse) => (response.body as { error: Record<string, string> }).error;

  it("answers a repeat of a refused transfer's key with the first answer again, its fields included: limit_exceeded and insufficient_funds", async () => {
    const rich = await stack.newAgent({ units: 20_000_000n });
    const poor = await stack.newAgent({ units: 1_000n });
    const to = newAccount().address;
    const asRich = agentCalls(stack.origin.base, rich.token);
    const overLimit = { idempotency_key: newKey(), to, amount: "10000000" };
    const limited = await asRich.transfer(overLimit);
    expect(limited.status).toBe(403);
    expect(errorOf(limited)).toMatchObject({
      code: "limit_exceeded",
      limit: "per_transaction",
      limit_units: "10000000",
      remaining_units: "10000000",
    });
    // Mutation: a repeat without the stored fields answers code, message and action_id only.
    const limitedAgain = await asRich.transfer(overLimit);
    expect(limitedAgain.status).toBe(403);
    expect(errorText(limitedAgain)).toBe(errorText(limited));

    const asPoor = agentCalls(stack.origin.base, poor.token);
    const shortOfFunds = { idempotency_key: newKey(), to, amount: "1000" };
    const broke = await asPoor.transfer(shortOfFunds);
    expect(broke.status).toBe(422);
    expect(Object.keys(errorOf(broke))).toEqual([
      "needed_units",
      "available_units",
      "needed_wei",
      "available_wei",
      "action_id",
      "code",
      "message",
      "request_id",
    ]);
    const brokeAgain = await asPoor.transfer(shortOfFunds);
    expect(brokeAgain.status).toBe(422);
    // In the first answer's order too (jsonb would have sorted the keys by length).
    expect(errorText(brokeAgain)).toBe(errorText(broke));
    expect(brokeAgain.headers["retry-after"]).toBeUndefined();
    expect(await balance(to)).toBe(0n);
  });

  it("answers a repeat of a refused transfer ended before its fields were stored (error_fields null) with its code, message and action_id, as before", async () => {
    const agent = await stack.newAgent({ units: 20_000_000n });
    const calls = agentCalls(stack.origin.base, agent.token);
    const over = { idempotency_key: newKey(), to: newAccount().address, amount: "10000000" };
    const first = await calls.transfer(over);
    expect(first.status).toBe(403);
    const { action_id: actionId, message } = errorOf(first);
    // The row as the migration that added error_fields left the actions ended before it.
    await stack.db.handle.db.execute(
      sql`update agent_actions set error_fields = null where action_id = ${actionId}`,
    );
    // Mutation: reading a null column as a bug (an unparsable row) answers 500 internal_error.
    const repeat = await calls.transfer(over);
    expect(repeat.status).toBe(403);
    expect(errorOf(repeat)).toEqual({
      code: "limit_exceeded",
      message,
      action_id: actionId,
      request_id: expect.any(String),
    });
  });

  it("answers GET /actions/{id} only to the action's own agent", async () => {
    const owner = await stack.newAgent({ units: 1_000_000n });
    const other = await stack.newAgent();
    const to = newAccount().address;
    const sent = await agentCalls(stack.origin.base, owner.token).transfer({
      idempotency_key: newKey(),
      to,
      amount: "5",
    });
    const actionId = (sent.body as ActionView).action_id;
    expect((await agentCalls(stack.origin.base, owner.token).action(actionId)).status).toBe(200);
    const foreign = await agentCalls(stack.origin.base, other.token).action(actionId);
    const unknown = await agentCalls(stack.origin.base, other.token).action(
      "00000000-0000-4000-8000-000000000000",
    );
    expect(foreign.status).toBe(404);
    expect(foreign.body).toMatchObject({ error: { code: "not_found" } });
    expect((unknown.body as { error: unknown }).error).toEqual({
      ...(foreign.body as { error: object }).error,
      request_id: expect.any(String),
    });
  });

  it("answers 403 recipient_not_allowed to a recipient off the node's allowlist before writing anything, as the policy check does", async () => {
    // The policy authority seals an allowlist; a node configured with the same list starts.
    // Mutation: dropping the gateway's check leaves the enclave to refuse it, after an action row
    // was written (and answered failed).
    const allowed = newAccount().address.toLowerCase() as Address;
    const sealed = await stack.signer.configurePolicy(
      { ...stack.policy, recipientAllowlist: [allowed] },
      stack.authorities.policy,
    );
    expect(sealed.ok).toBe(true);
    try {
      const strict = await stack.startOrigin({ AGENT_TRANSFER_RECIPIENT_ALLOWLIST: allowed });
      const agent = await stack.newAgent({ units: 1_000_000n });
      const calls = agentCalls(strict.base, agent.token);
      const refused = await calls.transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "1000",
      });
      expect(refused.status).toBe(403);
      expect(refused.body).toMatchObject({ error: { code: "recipient_not_allowed" } });
      // The policy check says so too, by the node's rule, and allows the listed recipient.
      expect((await calls.checkTransfer({ to: newAccount().address, amount: "1000" })).body).toEqual({
        decision: "deny",
        rule: "node.recipient_allowlist",
        remaining: "0",
      });
      expect((await calls.checkTransfer({ to: allowed, amount: "1000" })).body).toMatchObject({
        decision: "allow",
      });
      const rows = await queryRows<{ n: number }>(
        stack.db.handle.db,
        sql`select count(*)::int as n from agent_actions where agent_id = ${agent.agentId}`,
      );
      expect(rows[0]!.n).toBe(0);
      const paid = await calls.transfer({ idempotency_key: newKey(), to: allowed, amount: "1000" });
      expect(isAccepted(paid), JSON.stringify(paid.body)).toBe(true);
      expect((await calls.settled((paid.body as ActionView).action_id)).status).toBe("confirmed");
      expect(await balance(allowed)).toBe(1_000n * WEI_PER_UNIT);
    } finally {
      const restored = await stack.signer.configurePolicy(stack.policy, stack.authorities.policy);
      expect(restored.ok).toBe(true);
    }
  });

  it("answers a repeat of a key that moved money before the allowlist left its recipient out with that transfer, never recipient_not_allowed; a new key is refused", async () => {
    // Two origins on one database during a change of the allowlist (sealed first, then the origins
    // restarted one by one): the first paid `to`, the agent's repeat of the key lands on the other.
    // A 403 would read as "nothing paid", and an agent paying again would pay twice.
    const agent = await stack.newAgent({ units: 1_000_000n });
    const to = newAccount().address;
    const body = { idempotency_key: newKey(), to, amount: "1000" };
    const paid = await agentCalls(stack.origin.base, agent.token).transfer(body);
    expect(isAccepted(paid), JSON.stringify(paid.body)).toBe(true);
    const { action_id } = paid.body as ActionView;
    expect((await agentCalls(stack.origin.base, agent.token).settled(action_id)).status).toBe("confirmed");
    const allowed = newAccount().address.toLowerCase() as Address;
    const sealed = await stack.signer.configurePolicy(
      { ...stack.policy, recipientAllowlist: [allowed] },
      stack.authorities.policy,
    );
    expect(sealed.ok).toBe(true);
    try {
      const strict = await stack.startOrigin({ AGENT_TRANSFER_RECIPIENT_ALLOWLIST: allowed });
      const calls = agentCalls(strict.base, agent.token);
      const repeat = await calls.transfer(body);
      expect(repeat.status, JSON.stringify(repeat.body)).toBe(200);
      expect(repeat.body).toMatchObject({ action_id, status: "confirmed" });
      // The same key with another amount is still another request: 409, not a refusal of the amount.
      const other = await calls.transfer({ ...body, amount: "2000" });
      expect(other.status).toBe(409);
      expect(other.body).toMatchObject({ error: { code: "idempotency_conflict", action_id } });
      const fresh = await calls.transfer({ ...body, idempotency_key: newKey() });
      expect(fresh.status).toBe(403);
      expect(fresh.body).toMatchObject({ error: { code: "recipient_not_allowed" } });
      expect(await balance(to)).toBe(1_000n * WEI_PER_UNIT);
    } finally {
      const restored = await stack.signer.configurePolicy(stack.policy, stack.authorities.policy);
      expect(restored.ok).toBe(true);
    }
  });

  it("is 404 with the transfer switch off", async () => {
    const off = await stack.startOrigin({ AGENT_TRANSFER_ENABLED: "false" });
    const agent: StackAgent = await stack.newAgent();
    const response = await agentCalls(off.base, agent.token).transfer({
      idempotency_key: newKey(),
      to: getAddress(newAccount().address),
      amount: "1",
    });
    expect(response.status).toBe(404);
    expect(response.body).toMatchObject({ error: { code: "feature_disabled" } });
  });

  it("answers 503 service_unavailable while the chain's fees exceed the sealed ceiling, signing nothing; the same key signs once they fall", async () => {
    // Mutation: not-signed.ts chainRefusal not telling the fee quote's `above_fee_ceiling` apart
    // answers chain_unavailable, as if the chain had not answered.
    const agent = await stack.newAgent({ units: 1_000_000n });
    const calls = agentCalls(stack.origin.base, agent.token);
    const body = { idempotency_key: newKey(), to: newAccount().address, amount: "1000" };
    // A block at 100 gwei a gas: a transfer's fee at that price is over the stack's sealed 10^15 wei.
    const mineAt = async (baseFeeWei: bigint): Promise<void> => {
      await setNextBaseFee(stack.devnet.url, baseFeeWei);
      // dev_setBalance mines an empty block at that base fee.
      await fund(stack.devnet.url, newAccount().address, 1n);
      // The fee oracle reuses a reading for a second.
      await sleep(1_100);
    };
    await mineAt(100_000_000_000n);
    try {
      const refused = await calls.transfer(body);
      expect(refused.status).toBe(503);
      expect(refused.body).toMatchObject({
        error: {
          code: "service_unavailable",
          message: expect.stringContaining("exceed the sealed fee ceiling"),
        },
      });
      const [row] = await queryRows<{ status: string; tx_id: string | null }>(
        stack.db.handle.db,
        sql`select status, tx_id from agent_actions where agent_id = ${agent.agentId} and kind = 'transfer'`,
      );
      expect(row).toEqual({ status: "requested", tx_id: null });
    } finally {
      await mineAt(1_000_000_000n);
    }
    const retried = await calls.transfer(body);
    expect(retried.status, JSON.stringify(retried.body)).toBe(202);
  });
});
