import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { heldApprovalSubject } from "../shared/operator-approval.ts";
import {
  type AgentKey,
  agentKeys,
  enrolledOperator,
  filler,
  nodePolicy,
  type Operator,
  outcome,
  RECIPIENT,
  transfer,
} from "./testing/agent-policy.ts";
import { instanceIdOf, mintFor, privileged } from "./testing/capabilities.ts";
import { type ClockedEnclave, startClockedEnclave } from "./testing/clocked-enclave.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// Approvals lapse by the enclave's own clock: an operator's signature a day old, or an approved
// held action past its expiry, approves nothing. The test moves the enclave's clock.

describe("operator approvals and held approvals lapse by the enclave's clock (the enclave's server, the test's clock)", () => {
  let enclave: ClockedEnclave;
  let client: RawEnclaveClient;
  let key: AgentKey;
  let operator: Operator;
  const nowSeconds = (): number => Math.floor(enclave.clock.now().getTime() / 1000);

  const approveHeld = async (
    actionId: string,
    value: bigint,
    change: { expiresAt?: number; heldFor?: number } = {},
  ) => {
    const approvalExpiresAt = nowSeconds() + (change.heldFor ?? 600);
    const subject = heldApprovalSubject(
      {
        instanceId: await instanceIdOf(client),
        keyRef: key.key_ref,
        kind: "transfer",
        ref: actionId,
        to: RECIPIENT,
        valueUnits: value,
      },
      approvalExpiresAt,
    );
    const params = {
      key_ref: key.key_ref,
      kind: "transfer",
      ref: actionId,
      to: RECIPIENT,
      value_units: value.toString(),
      expires_at: approvalExpiresAt,
      operator: await operator.approve("approve_held", subject, {
        expiresAt: change.expiresAt ?? nowSeconds() + 300,
      }),
    };
    return client.request(
      "approve_held",
      params,
      await mintFor(client, enclave.fixture, "approve_held", params),
    );
  };

  beforeAll(async () => {
    enclave = await startClockedEnclave({
      envId: "agent-policy-clock",
      at: new Date("2031-05-31T23:50:00Z"),
    });
    ({ client } = await RawEnclaveClient.connect(enclave.fixture.socketPath));
    await privileged(client, enclave.fixture, "configure_policy", nodePolicy());
    [key] = (await agentKeys(client, enclave.fixture, 1)) as [AgentKey];
    operator = await enrolledOperator(client, enclave.fixture);
    const params = {
      key_ref: key.key_ref,
      policy: { approval_above_units: "1000", transfers: { daily_units: "20000", monthly_units: "30000" } },
    };
    expectOk(
      await client.request(
        "set_agent_policy",
        params,
        await mintFor(client, enclave.fixture, "set_agent_policy", params),
      ),
    );
  });
  afterAll(async () => {
    client?.close();
    await enclave?.close();
  });

  it("an operator approval past its expiry, or more than an hour ahead, is operator_expired", async () => {
    expect(outcome(await approveHeld(randomUUID(), 5000n, { expiresAt: nowSeconds() - 1 }))).toEqual({
      code: "capability_rejected",
      detail: "operator_expired",
    });
    expect(outcome(await approveHeld(randomUUID(), 5000n, { expiresAt: nowSeconds() + 3601 }))).toEqual({
      code: "capability_rejected",
      detail: "operator_expired",
    });
  });

  it("an approved held transfer past its approval's expiry is policy_held again", async () => {
    const actionId = randomUUID();
    expectOk(await approveHeld(actionId, 5000n, { heldFor: 60 }));
    enclave.clock.advance(61_000);
    expect(
      outcome(await client.request("sign_transfer", transfer(key, 5000n, { action_id: actionId }))),
    ).toEqual({
      code: "cap_exceeded",
      detail: "policy_held",
      rule: "approval_above_units",
    });
  });

  it("a filler's fee counts in the day's and month's units, never held nor frozen; the month's budget outlives the day", async () => {
    // 900 + 21 units, under the approval threshold; then fillers at that nonce's key.
    const first = transfer(key, 900n);
    expectOk(await client.request("sign_transfer", first));
    expectOk(await client.request("sign_filler", filler(key, first.nonce)));
    const status = expectOk(await client.request("get_agent_policy", { key_ref: key.key_ref }));
    expect(status.usage).toMatchObject({ transfers: { day_units: "942", month_units: "942", day_count: 1 } });
    // Next UTC day, next month: both windows start again.
    enclave.clock.set(new Date("2031-06-01T00:00:10Z"));
    const fresh = expectOk(await client.request("get_agent_policy", { key_ref: key.key_ref }));
    expect(fresh.usage).toMatchObject({
      day: "2031-06-01",
      month: "2031-06",
      transfers: { day_units: "0", month_units: "0" },
    });
  });

  it("a filler whose fee would pass the day's units is policy_denied by rule, and counts nothing", async () => {
    const [tight] = (await agentKeys(client, enclave.fixture, 1)) as [AgentKey];
    const params = { key_ref: tight.key_ref, policy: { transfers: { daily_units: "930" } } };
    expectOk(
      await client.request(
        "set_agent_policy",
        params,
        await mintFor(client, enclave.fixture, "set_agent_policy", params),
      ),
    );
    // 900 + 21 = 921 of 930; a filler's 21 more would be 942.
    const first = transfer(tight, 900n);
    expectOk(await client.request("sign_transfer", first));
    expect(outcome(await client.request("sign_filler", filler(tight, first.nonce)))).toEqual({
      code: "cap_exceeded",
      detail: "policy_denied",
      rule: "transfers.daily_units",
    });
    const status = expectOk(await client.request("get_agent_policy", { key_ref: tight.key_ref }));
    expect(status.usage).toMatchObject({ transfers: { day_units: "921", day_count: 1 } });
  });

  it("a filler whose fee would pass the month's units, the day's still open, is policy_denied by that rule", async () => {
    const [tight] = (await agentKeys(client, enclave.fixture, 1)) as [AgentKey];
    const params = {
      key_ref: tight.key_ref,
      policy: { transfers: { daily_units: "100000", monthly_units: "930" } },
    };
    expectOk(
      await client.request(
        "set_agent_policy",
        params,
        await mintFor(client, enclave.fixture, "set_agent_policy", params),
      ),
    );
    // 900 + 21 = 921 of the month's 930; a filler's 21 more would be 942.
    const first = transfer(tight, 900n);
    expectOk(await client.request("sign_transfer", first));
    expect(outcome(await client.request("sign_filler", filler(tight, first.nonce)))).toEqual({
      code: "cap_exceeded",
      detail: "policy_denied",
      rule: "transfers.monthly_units",
    });
    const status = expectOk(await client.request("get_agent_policy", { key_ref: tight.key_ref }));
    expect(status.usage).toMatchObject({ transfers: { day_units: "921", month_units: "921", day_count: 1 } });
  });
});
