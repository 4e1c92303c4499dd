import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount } from "../../devnet/testing.ts";
import { type MoneyStack, type StackAgent, startMoneyStack } from "../../scripts/test/money-stack.ts";
import { broadcastLeaseMs } from "../chain/outgoing.ts";
import { queryRows } from "../db/client.ts";
import type { AuthenticatedAgent } from "../http/env.ts";
import {
  createMoneyExecutor,
  type ExecuteOutcome,
  type MoneyExecutor,
  type MoneyOperation,
} from "./execute.ts";
import { faucetOperation } from "./faucet.ts";
import { claimActions, requestHash } from "./repository.ts";
import { transferOperation } from "./transfers.ts";

// The executor's batches, against the real stack: operations handed over in one turn of the event
// loop share a batch, and each must see the ones before it in that batch as if they had committed.

describe("money executor batches (real stack)", () => {
  let stack: MoneyStack;
  let executor: MoneyExecutor;

  beforeAll(async () => {
    // Per-transaction 10 USDC, daily 50 USDC, faucet 1 USDC a minute (the stack's defaults).
    stack = await startMoneyStack();
    const deps = stack.origin.deps;
    executor = createMoneyExecutor({
      db: deps.database.db,
      rpc: deps.rpc!,
      fees: deps.money!.fees,
      clock: deps.clock,
      logger: deps.logger,
      leaseMs: broadcastLeaseMs(deps.config.chain.timeoutMs),
      broadcasts: deps.money!.broadcasts,
    });
  });
  afterAll(async () => {
    await stack?.close();
  });

  const asAgent = (agent: StackAgent): AuthenticatedAgent => ({
    agentId: agent.agentId,
    assignedWallet: agent.wallet,
    keyRef: agent.keyRef,
    capabilities: ["read", "faucet", "transfer"],
  });

  /** Claims one action per operation, then hands them all to the executor in one turn. */
  async function inOneBatch(
    kind: "transfer" | "faucet",
    agents: StackAgent[],
    build: (actionId: string, agent: StackAgent) => MoneyOperation,
  ): Promise<ExecuteOutcome[]> {
    const claims = await claimActions(
      stack.db.handle.db,
      agents.map((agent, index) => ({
        agentId: agent.agentId,
        kind,
        idempotencyKey: `batch-${Date.now()}-${index}`,
        requestHash: requestHash(kind, { n: String(index) }),
        amountUnits: null,
        toAddress: null,
      })),
    );
    const operations = claims.map((claim, index) => build(claim.action.actionId, agents[index]!));
    return Promise.all(operations.map((operation) => executor.execute(operation)));
  }

  const services = () => ({
    config: stack.origin.deps.config,
    signer: stack.signer,
    clock: stack.origin.deps.clock,
  });

  it("counts earlier transfers of the same batch against the daily limit: exactly five of six fit", async () => {
    const agent = await stack.newAgent({ units: 100_000_000n });
    const to = newAccount().address.toLowerCase();
    // Six of 9 USDC each: five (plus their fees) fit the 50 USDC day, the sixth does not.
    const outcomes = await inOneBatch("transfer", Array(6).fill(agent), (actionId) =>
      transferOperation(services(), { actionId, agent: asAgent(agent), to, amount: 9_000_000n }),
    );
    expect(outcomes.filter((outcome) => outcome.kind === "signed")).toHaveLength(5);
    const refused = outcomes.filter((outcome) => outcome.kind === "refused");
    expect(refused).toHaveLength(1);
    // The gateway's own count refused it, not the enclave's re-check.
    expect(refused[0]).toMatchObject({
      refusal: {
        code: "limit_exceeded",
        fields: { limit: "daily" },
        message: expect.stringContaining("over what remains"),
      },
    });
    const nonces = await queryRows<{ nonce: string }>(
      stack.db.handle.db,
      sql`select nonce::text from outgoing_transactions where sender = ${agent.wallet.toLowerCase()} order by nonce`,
    );
    expect(nonces.map((row) => row.nonce)).toEqual(["0", "1", "2", "3", "4"]);
  });

  it("counts an earlier payout of the same batch against the cooldown: one of two is paid", async () => {
    const agent = await stack.newAgent();
    const treasury = stack.origin.deps.money!.treasury!;
    const outcomes = await inOneBatch("faucet", [agent, agent], (actionId) =>
      faucetOperation(services(), { actionId, agent: asAgent(agent), treasury }),
    );
    expect(outcomes.map((outcome) => outcome.kind).sort()).toEqual(["refused", "signed"]);
    expect(outcomes.find((outcome) => outcome.kind === "refused")).toMatchObject({
      refusal: { code: "faucet_cooldown" },
    });
  });

  it("keeps a refusal to its own operation: the rest of the batch is signed", async () => {
    const rich = await stack.newAgent({ units: 10_000_000n });
    const broke = await stack.newAgent();
    const alsoRich = await stack.newAgent({ units: 10_000_000n });
    const to = newAccount().address.toLowerCase();
    const outcomes = await inOneBatch("transfer", [rich, broke, alsoRich], (actionId, agent) =>
      transferOperation(services(), { actionId, agent: asAgent(agent), to, amount: 1_000n }),
    );
    expect(outcomes.map((outcome) => outcome.kind)).toEqual(["signed", "refused", "signed"]);
    expect(outcomes[1]).toMatchObject({ refusal: { code: "insufficient_funds" } });
  });
});
