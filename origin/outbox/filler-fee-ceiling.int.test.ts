import { sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../devnet/testing.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import { startRpcRefusalProxy } from "../../testing/rpc-refusal-proxy.ts";
import { useFixture, useMoneyStack } from "../../testing/stack.ts";
import { createFeeOracle, NATIVE_TRANSFER_GAS } from "../chain/fees.ts";
import { createJsonRpcUpstream } from "../chain/json-rpc-upstream.ts";
import { OUTBOX_DOMAINS } from "../compose.ts";
import { queryRows } from "../db/client.ts";
import { createLogger } from "../logger.ts";
import { createSignerClient } from "../signer/create-signer-client.ts";
import { createOutbox } from "./outbox.ts";

// A transfer signed at the sealed fee ceiling's cap, then stuck under a base fee that rose past it:
// no filler can outbid it under the same ceiling. docs/operations.md ("What to watch") tells the
// operator to look for the origin's log line about the filler; the origin must write one, and not
// ask again every second. Real processes: the devnet itself raises its base fee
// (dev_setNextBlockBaseFeePerGas, no fake) and refuses the transfer.

describe("a stuck transfer no filler can outbid under the sealed fee ceiling (real processes)", () => {
  const stack = useMoneyStack({ tracker: { periodMs: 3_600_000 } }, { timeoutMs: 120_000 });
  const proxy = useFixture(
    "pass-through",
    () => startRpcRefusalProxy(stack.devnet.url),
    (passing) => passing.close(),
    { timeoutMs: 120_000 },
  );

  it("logs that the fee ceiling leaves no filler, once, and signs none; the transfer stays in flight", async () => {
    // Mutation: the filler kind answering every fee refusal as the chain being unavailable (the
    // code before) writes no line: the operator is told nothing, and each sweep asks again.
    const chain = publicClientFor(stack.devnet.url);
    // The origin's tracker never sweeps: the tracker below, whose log the test reads, does.
    const origin = await stack.startOrigin({}, { periodMs: 3_600_000, sweepMs: 3_600_000 }, proxy.url);
    const rpc = createJsonRpcUpstream({ url: stack.devnet.url, timeoutMs: 5_000 });
    const signer = createSignerClient({
      endpoint: `unix://${stack.enclave.socketPath}`,
      liveIdentityEnabled: true,
    });
    const lines: Array<{ level: number; msg: string; detail?: string }> = [];
    const { tracker } = createOutbox(
      {
        db: stack.db.handle.db,
        rpc,
        logger: createLogger("info", { write: (line: string) => void lines.push(JSON.parse(line)) }),
        signer,
        fees: createFeeOracle({ rpc, feeCeilingWei: stack.policy.feeCeilingWei }),
        serviceKeys: new Map(),
        chainTimeoutMs: 5_000,
        maxWaiting: 128,
      },
      OUTBOX_DOMAINS,
    );
    try {
      const agent = await stack.newAgent({ units: 1_000_000n });
      const wallet = agent.wallet.toLowerCase();
      // A base fee at which the transfer's fee cap is the ceiling's whole allowance per gas...
      const allowed = stack.policy.feeCeilingWei / NATIVE_TRANSFER_GAS;
      await chain.request({
        method: "dev_setNextBlockBaseFeePerGas" as never,
        params: [`0x${(allowed / 2n).toString(16)}`] as never,
      });
      // ...and past it by the time the transfer reaches the chain, which refuses it.
      const rise = proxy.raiseBaseFeeBeforeSend(allowed + 1_000_000_000n);
      const answer = await agentCalls(origin.base, agent.token).transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "1000",
      });
      expect(answer.status, JSON.stringify(answer.body)).toBe(202);
      await rise;
      const actionId = (answer.body as ActionView).action_id;
      await expect
        .poll(async () => (await agentCalls(origin.base, agent.token).action(actionId)).body)
        .toMatchObject({ status: "submitted", last_broadcast_error: expect.stringMatching(/base fee/) });
      await tracker.tick();
      await tracker.tick();
      const told = lines.filter((line) => /fee ceiling/.test(line.msg));
      expect(told, JSON.stringify(lines)).toHaveLength(1);
      expect(told[0]!.level).toBe(50);
      expect(told[0]!.detail).toMatch(/fee ceiling/);
      expect(
        await queryRows(
          stack.db.handle.db,
          sql`select purpose, status from outgoing_transactions where sender = ${wallet}`,
        ),
      ).toEqual([{ purpose: "transfer", status: "submitted" }]);
    } finally {
      await tracker.stop();
      rpc.close();
      await signer.close();
      await origin.close();
    }
  }, 90_000);
});
