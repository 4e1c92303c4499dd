import { describe, expect, it } from "vitest";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { consoleSecrets } from "../../testing/console-client.ts";
import { send } from "../../testing/http.ts";
import { agentCalls, isAccepted } from "../../testing/money-client.ts";
import { type Exposition, parsePrometheusText } from "../../testing/prometheus.ts";
import { useMoneyStack } from "../../testing/stack.ts";
import { BATCH_STEPS } from "./submit.ts";

// The outbox's batches in GET {base}/metrics (docs/operations.md, "Reading the metrics"): a real
// faucet payout through the real stack, and the batch it ran in, step by step.

const secrets = consoleSecrets();

describe("outbox batches in the metrics (real stack)", () => {
  const stack = useMoneyStack({ env: secrets.env });

  const scrape = async (): Promise<Exposition> => {
    const response = await send(`${stack.origin.base}/metrics`, {
      headers: { authorization: `Bearer ${secrets.adminToken}` },
    });
    expect(response.status).toBe(200);
    return parsePrometheusText(String(response.body));
  };

  it("counts a payout's batch and its size, and times each of its steps from the batch's start, in order", async () => {
    const before = await scrape();
    expect(Object.fromEntries(before.types)).toMatchObject({
      origin_outbox_batch_step_seconds: "histogram",
      origin_outbox_batch_items: "histogram",
    });
    const batchesBefore = before.value("origin_outbox_batch_items_count", { kind: "money" }) ?? 0;

    const agent = await stack.newAgent();
    const calls = agentCalls(stack.origin.base, agent.token);
    const response = await calls.faucet();
    expect(isAccepted(response)).toBe(true);
    await calls.settled((response.body as ActionView).action_id);

    const after = await scrape();
    // One batch of one payout: nothing else asked this origin to sign meanwhile.
    expect(after.value("origin_outbox_batch_items_count", { kind: "money" })).toBe(batchesBefore + 1);
    const stepsBefore = BATCH_STEPS.map(
      (step) => before.value("origin_outbox_batch_step_seconds_sum", { kind: "money", step }) ?? 0,
    );
    const seconds = BATCH_STEPS.map((step, n) => {
      expect(after.value("origin_outbox_batch_step_seconds_count", { kind: "money", step })).toBe(
        batchesBefore + 1,
      );
      return after.value("origin_outbox_batch_step_seconds_sum", { kind: "money", step })! - stepsBefore[n]!;
    });
    // Each step ends after the one before it, and the batch ends last.
    expect(seconds[0]).toBeGreaterThan(0);
    for (let n = 1; n < seconds.length; n++) expect(seconds[n]).toBeGreaterThanOrEqual(seconds[n - 1]!);
  });
});
