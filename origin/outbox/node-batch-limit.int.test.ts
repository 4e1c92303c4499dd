import { describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import { useMoneyStack } from "../../testing/stack.ts";

// A node that takes at most a few calls in one JSON-RPC batch (hosted nodes cap batches; geth's
// --rpc.batch-request-limit) refuses a longer one whole, with one error object. The origin's own
// batches (each sender's chain view, the broadcasts, the receipts read after them) go in parts of
// CHAIN_RPC_BATCH_LIMIT. Real processes: the devnet refuses a batch of more than one call as such a
// node would (at one, every sender's view, its nonce then its balance, is past the limit, whatever
// arrives together).

const AGENTS = 6;

describe("a node that caps JSON-RPC batches (real processes)", () => {
  const stack = useMoneyStack(
    { devnetMaxBatchLength: 1, env: { CHAIN_RPC_BATCH_LIMIT: "1" } },
    { timeoutMs: 120_000 },
  );

  it("confirms transfers from many senders at once, each sent and followed in parts the node takes", async () => {
    // Mutation: one batch for all (the code before) is refused whole by the node: each sender's
    // view is unknown, so every transfer is refused 503.
    const agents = await stack.newAgents(AGENTS, { units: 1_000_000n });
    const recipient = newAccount().address;
    const answers = await Promise.all(
      agents.map((agent) =>
        agentCalls(stack.origin.base, agent.token).transfer({
          idempotency_key: newKey(),
          to: recipient,
          amount: "1000",
        }),
      ),
    );
    expect(answers.map((answer) => answer.status)).toEqual(Array(AGENTS).fill(202));
    const ended = await Promise.all(
      answers.map((answer, n) =>
        agentCalls(stack.origin.base, agents[n]!.token).settled(
          (answer.body as { action_id: string }).action_id,
        ),
      ),
    );
    expect(ended.map((view) => view.status)).toEqual(Array(AGENTS).fill("confirmed"));
    const received = await publicClientFor(stack.devnet.url).getBalance({ address: recipient });
    expect(received).toBe(BigInt(AGENTS) * 1_000n * WEI_PER_UNIT);
  });
});
