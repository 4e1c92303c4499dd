import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type AgentKey,
  agentKeys,
  filler,
  NODE_PAY_TO,
  NODE_X402_UNITS,
  nodePolicy,
  outcome,
  transfer,
  x402,
} from "./testing/agent-policy.ts";
import { mintFor, privileged } from "./testing/capabilities.ts";
import { type ClockedEnclave, startClockedEnclave } from "./testing/clocked-enclave.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// The sealed per-day records (a key's spend, its x402 count, an agent policy's day) against a host
// clock stepped back across midnight and then forward again, as NTP does to a clock found fast. The
// enclave's server runs in the test's process with the test's clock (testing/clocked-enclave.ts, a
// fake clock: no test can step the system clock); everything else is the real server.

const AFTER_MIDNIGHT = new Date("2031-03-05T00:05:00Z");
const BEFORE_MIDNIGHT = new Date("2031-03-04T23:58:00Z");

describe("per-day records under a clock stepped back across midnight (the enclave's server, the test's clock)", () => {
  let enclave: ClockedEnclave;
  let client: RawEnclaveClient;
  let keys: AgentKey[];
  const nowSeconds = (): number => Math.floor(enclave.clock.now().getTime() / 1000);

  beforeAll(async () => {
    enclave = await startClockedEnclave({ envId: "clock-step-back", at: AFTER_MIDNIGHT });
    ({ client } = await RawEnclaveClient.connect(enclave.fixture.socketPath));
    // 200 units a key and day, two x402 authorizations a key and day.
    await privileged(client, enclave.fixture, "configure_policy", {
      ...nodePolicy(),
      daily_limit_units: "200",
      x402_daily_limit: 2,
    });
    keys = await agentKeys(client, enclave.fixture, 2);
    // The second key's own policy: 100 units a day.
    const params = { key_ref: keys[1]!.key_ref, policy: { transfers: { daily_units: "100" } } };
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

  it("spends one day's budget and count once: stepped back to the day before and forward again, the key keeps counting in the later day", async () => {
    const [key, withPolicy] = keys as [AgentKey, AgentKey];
    const sign = {
      transfer: async (k: AgentKey, value: bigint) =>
        outcome(await client.request("sign_transfer", transfer(k, value))),
      x402: async () =>
        outcome(
          await client.request(
            "sign_x402_authorization",
            x402(key, NODE_PAY_TO, NODE_X402_UNITS, {}, nowSeconds()),
          ),
        ),
    };
    const spent = () => ({ code: "cap_exceeded", detail: "daily" });
    const counted = () => ({ code: "cap_exceeded", detail: "x402_daily" });
    const policyDay = () => ({
      code: "cap_exceeded",
      detail: "policy_denied",
      rule: "transfers.daily_units",
    });

    // The day's whole budget (179 + 21 of fee), count and policy day, just after midnight.
    expect(await sign.transfer(key, 179n)).toBe("signed");
    expect([await sign.x402(), await sign.x402()]).toEqual(["signed", "signed"]);
    expect(await sign.transfer(withPolicy, 79n)).toBe("signed");
    const spentOut = [await sign.transfer(key, 1n), await sign.x402(), await sign.transfer(withPolicy, 1n)];
    expect(spentOut).toEqual([spent(), counted(), policyDay()]);

    // Mutation: a record of another day read as zero signs all three again here, and again below.
    enclave.clock.set(BEFORE_MIDNIGHT);
    expect([await sign.transfer(key, 1n), await sign.x402(), await sign.transfer(withPolicy, 1n)]).toEqual(
      spentOut,
    );
    enclave.clock.set(new Date(AFTER_MIDNIGHT.getTime() + 120_000));
    expect([await sign.transfer(key, 1n), await sign.x402(), await sign.transfer(withPolicy, 1n)]).toEqual(
      spentOut,
    );

    // The next day starts afresh, as before.
    enclave.clock.set(new Date("2031-03-06T00:00:00Z"));
    expect([await sign.transfer(key, 179n), await sign.x402(), await sign.transfer(withPolicy, 79n)]).toEqual(
      ["signed", "signed", "signed"],
    );
  });

  it("answers the day it counted an x402 authorization, a transfer or a filler on, the later day when the clock stepped back, so the origin counts it where this count is", async () => {
    const [key] = keys as [AgentKey];
    const countedOn = async () => {
      const x402Answer = expectOk(
        await client.request(
          "sign_x402_authorization",
          x402(key, NODE_PAY_TO, NODE_X402_UNITS, {}, nowSeconds()),
        ),
      ) as { counted_on?: string };
      const paid = transfer(key, 1n);
      const transferAnswer = expectOk(await client.request("sign_transfer", paid)) as {
        counted_on?: string;
      };
      // Mutation: sign_filler answering no day (the code before) leaves the origin its database's.
      const fillerAnswer = expectOk(await client.request("sign_filler", filler(key, paid.nonce))) as {
        counted_on?: string;
      };
      return [x402Answer.counted_on, transferAnswer.counted_on, fillerAnswer.counted_on];
    };
    enclave.clock.set(new Date("2031-03-07T00:00:01Z"));
    expect(await countedOn()).toEqual(["2031-03-07", "2031-03-07", "2031-03-07"]);
    enclave.clock.set(new Date("2031-03-06T23:59:30Z"));
    expect(await countedOn()).toEqual(["2031-03-07", "2031-03-07", "2031-03-07"]);
  });
});
