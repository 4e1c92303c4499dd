import { sql } from "drizzle-orm";
import type { Address } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../devnet/testing.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import type { ActionView } from "../../shared/gateway-schemas.ts";
import { sleep } from "../../shared/sleep.ts";
import { consoleCalls, consoleSecrets } from "../../testing/console-client.ts";
import { send } from "../../testing/http.ts";
import { agentCalls, newKey } from "../../testing/money-client.ts";
import { type MoneyStack, startMoneyStack } from "../../testing/money-stack.ts";
import type { TestOrigin } from "../../testing/origin.ts";
import { parsePrometheusText } from "../../testing/prometheus.ts";
import { type RpcCutProxy, startRpcCutProxy } from "../../testing/rpc-cut-proxy.ts";
import { queryRows } from "../db/client.ts";

// An operator's disable (docs/operations.md#the-operator-console-and-metrics) on the whole money
// stack (origin, enclave, devnet, Postgres): a disable through the console applies at the agent's
// next request, moves no funds, and does not cancel a transfer already submitted: the tracker still
// confirms it. The devnet mines on arrival, so a transfer is recorded `confirmed` right after its
// broadcast unless its receipt cannot be read: the origin here reaches the devnet through a FAKE
// JSON-RPC pass-through that answers 503 to receipt reads while the test withholds them, which
// leaves it `submitted`.

const secrets = consoleSecrets();

describe("operator disable with a transfer in flight (real stack)", () => {
  let stack: MoneyStack;
  let proxy: RpcCutProxy;
  let origin: TestOrigin;
  let chain: ReturnType<typeof publicClientFor>;

  beforeAll(async () => {
    stack = await startMoneyStack({ env: secrets.env });
    proxy = await startRpcCutProxy(stack.devnet.url);
    origin = await stack.startOrigin({}, undefined, proxy.url);
    chain = publicClientFor(stack.devnet.url);
  });
  afterAll(async () => {
    // The stack closes its origins, this one too.
    await stack?.close();
    await proxy?.close();
  });

  it("refuses the agent's next request, moves nothing, and the submitted transfer still confirms", async () => {
    const agent = await stack.newAgent({ units: 20_000_000n });
    const calls = agentCalls(origin.base, agent.token);
    const operator = consoleCalls(origin.base, {
      admin: secrets.adminToken,
      change: secrets.changeToken,
    });
    const balance = (address: Address) => chain.getBalance({ address });
    const recipient = newAccount().address;
    // The trackers are held back, so the transfer stays `submitted` until this test lets one run.
    await stack.origin.tracker!.stop();
    await origin.tracker!.stop();

    const actionState = async (actionId: string) =>
      (
        await queryRows<{ action: string; tx: string }>(
          stack.db.handle.db,
          sql`select a.status as action, t.status as tx from agent_actions a
              join outgoing_transactions t on t.tx_id = a.tx_id where a.action_id = ${actionId}`,
        )
      )[0];

    proxy.withhold("eth_getTransactionReceipt");
    const answered = await calls.transfer({ idempotency_key: newKey(), to: recipient, amount: "1500000" });
    expect(answered.status).toBe(202);
    const action = answered.body as ActionView;
    expect(action.status).toBe("signed");
    // The broadcast follows the answer; its receipt read is withheld, so it is recorded `submitted`.
    const deadline = Date.now() + 10_000;
    while ((await actionState(action.action_id))?.action !== "submitted" && Date.now() < deadline)
      await sleep(20);
    proxy.withhold(undefined);
    expect(proxy.withheld).toBe(1);
    const funds = async () => ({ agent: await balance(agent.wallet), recipient: await balance(recipient) });
    const before = await funds();

    const disabled = await operator.post("/registration/identity", {
      agent_id: agent.agentId,
      action: "disable",
      reason: "suspicious transfers",
    });
    expect(disabled.status).toBe(200);
    expect((await calls.action(action.action_id)).status).toBe(401);
    expect(
      (await calls.transfer({ idempotency_key: newKey(), to: recipient, amount: "1000000" })).status,
    ).toBe(401);
    // Nothing moved and nothing was cancelled: the transaction is still on its way.
    expect(await funds()).toEqual(before);
    expect(await actionState(action.action_id)).toEqual({ action: "submitted", tx: "submitted" });

    const report = await origin.tracker!.tick();
    expect(report.confirmed).toBe(1);
    expect(await actionState(action.action_id)).toEqual({ action: "confirmed", tx: "confirmed" });
    expect(await balance(recipient)).toBe(1_500_000n * WEI_PER_UNIT);

    const enabled = await operator.post("/registration/identity", {
      agent_id: agent.agentId,
      action: "enable",
      reason: "cleared",
    });
    expect(enabled.status).toBe(200);
    const seen = await calls.action(action.action_id);
    expect(seen.status).toBe(200);
    expect(seen.body).toMatchObject({ action_id: action.action_id, status: "confirmed" });

    // The enclave and chain calls behind the transfer, timed in /metrics.
    const scraped = await send(`${origin.base}/metrics`, {
      headers: { authorization: `Bearer ${secrets.adminToken}` },
    });
    const metrics = parsePrometheusText(String(scraped.body));
    expect(
      metrics.value("origin_enclave_call_duration_seconds_count", { op: "signTransfer", outcome: "ok" }),
    ).toBeGreaterThanOrEqual(1);
    expect(
      metrics.samples.some(
        (sample) =>
          sample.name === "origin_chain_call_duration_seconds_count" &&
          sample.labels.outcome === "ok" &&
          sample.value > 0,
      ),
    ).toBe(true);
  });
});
