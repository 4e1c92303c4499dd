import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSocketSignerClient } from "../origin/signer/socket-client.ts";
import type { SignerClient } from "../origin/signer/types.ts";
import { type AgentPolicyDocument, policyFromDocument } from "../shared/agent-policy.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { dataDirLayout } from "./data-dir.ts";
import { readSealingKey } from "./sealed-config.ts";
import { StateStore } from "./state-store.ts";
import { type AgentKey, agentKeys, NODE_PAY_TO, nodePolicy } from "./testing/agent-policy.ts";
import { privileged } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// Releases before the resource prefix refused control characters sealed whatever an agent's
// tightening named there (an agent's own to make: a tab, say, and a NUL the database then could
// not store). The enclave upgraded over such a state must still start and hold that policy: its
// sealed state is every key's spend and counters, and nothing but the enclave can read it.

const prefix = (resource: string): AgentPolicyDocument => ({
  x402: { payees: [{ pay_to: NODE_PAY_TO, resource_prefix: resource, per_payment_units: "10000" }] },
});

describe("an agent policy an earlier release sealed with a control character in a resource prefix (real process)", () => {
  let fixture: EnclaveFixture;
  let key: AgentKey;
  let signer: SignerClient | undefined;

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "policy-upgrade" });
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    await privileged(client, fixture, "configure_policy", nodePolicy());
    [key] = (await agentKeys(client, fixture, 1)) as [AgentKey];
    await privileged(client, fixture, "set_agent_policy", {
      key_ref: key.key_ref,
      policy: prefix("https://api.example/paid"),
    });
    client.close();
    await fixture.stop();
    // What the earlier release's set_agent_policy sealed for the tightening to this prefix: the
    // store writes the state as it is given, as it did then.
    const layout = dataDirLayout(fixture.dataDir);
    const store = await StateStore.open(layout.state, await readSealingKey(layout));
    const sealed = prefix("https://api.example/\tpaid\u0000");
    await store.commit((state) => {
      const record = state.agentPolicies.get(key.key_ref)!;
      state.agentPolicies.set(key.key_ref, {
        ...record,
        document: sealed,
        policy: policyFromDocument(sealed),
      });
    });
    await store.close();
  });
  afterAll(async () => {
    await signer?.close();
    await fixture?.dispose();
  });

  it("starts over it and answers that policy, to a raw client and to the origin's signer client", async () => {
    await fixture.start();
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    const answer = expectOk(await client.request("get_agent_policy", { key_ref: key.key_ref }));
    client.close();
    expect(answer).toMatchObject({ policy: prefix("https://api.example/\tpaid\u0000"), version: 1 });
    signer = createSocketSignerClient({ socketPath: fixture.socketPath });
    const status = await signer.getAgentPolicy({ keyRef: key.key_ref });
    expect(status).toMatchObject({
      ok: true,
      value: { policy: prefix("https://api.example/\tpaid\u0000"), version: 1 },
    });
  });
});
