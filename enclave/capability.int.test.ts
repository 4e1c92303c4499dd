import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { ed25519 } from "@noble/curves/ed25519";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encodeCanonicalCbor } from "../shared/canonical-cbor.ts";
import {
  authorityPublicKey,
  CAPABILITY_VERSION,
  type CapabilityBody,
  capabilitySigningPreimage,
  payloadBinding,
  randomAuthoritySecret,
} from "../shared/capability.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import { toHex } from "../shared/hex.ts";
import { createEnclaveFixture, type EnclaveFixture } from "../testing/enclave-process.ts";
import { instanceIdOf, mintFor, nextCounter } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

describe("capabilities (real process)", () => {
  let fixture: EnclaveFixture;
  let client: RawEnclaveClient;
  const params = { namespace: "agent-transfer", count: 2, batch_id: "batch-cap-1" };

  const keyFiles = async (): Promise<number> =>
    (await readdir(join(fixture.dataDir, "keys"))).filter((name) => name.endsWith(".sealed")).length;

  /** Sends generate_keys with `cap` and checks it was refused with no key written and no counter used. */
  const expectRejectedWithoutStateChange = async (cap: unknown, sent = params): Promise<void> => {
    const filesBefore = await keyFiles();
    const counterBefore = await nextCounter(client, fixture.adminSecret, "generate_keys");
    const response = await client.request("generate_keys", sent, cap);
    expect(response).toEqual({
      v: 1,
      id: expect.any(Number),
      ok: false,
      error: { code: "capability_rejected", reason: expect.any(String) },
    });
    expect(await keyFiles()).toBe(filesBefore);
    expect(await nextCounter(client, fixture.adminSecret, "generate_keys")).toBe(counterBefore);
  };

  beforeAll(async () => {
    fixture = await createEnclaveFixture();
    ({ client } = await RawEnclaveClient.connect(fixture.socketPath));
  });
  afterAll(async () => {
    client?.close();
    await fixture?.dispose();
  });

  it("accepts a valid admin capability, generates the batch and advances the counter", async () => {
    expect(await nextCounter(client, fixture.adminSecret, "generate_keys")).toBe(1);
    const cap = await mintFor(client, fixture, "generate_keys", params);
    const result = expectOk(await client.request("generate_keys", params, cap));
    expect(result).toMatchObject({ batch_id: "batch-cap-1", namespace: "agent-transfer" });
    expect(result.keys).toHaveLength(2);
    expect(await nextCounter(client, fixture.adminSecret, "generate_keys")).toBe(2);
    // The batch, beside the payee key init made.
    expect(await keyFiles()).toBe(2);
  });

  it("refuses a replayed capability", async () => {
    const other = { ...params, batch_id: "batch-replay" };
    const cap = await mintFor(client, fixture, "generate_keys", other);
    expectOk(await client.request("generate_keys", other, cap));
    await expectRejectedWithoutStateChange(cap, other);
  });

  it("refuses a capability that skips a counter ahead", async () => {
    const counter = (await nextCounter(client, fixture.adminSecret, "generate_keys")) + 1;
    await expectRejectedWithoutStateChange(
      await mintFor(client, fixture, "generate_keys", params, { counter }),
    );
  });

  it("refuses a capability signed by an unknown authority", async () => {
    await expectRejectedWithoutStateChange(
      await mintFor(client, fixture, "generate_keys", params, {
        secret: randomAuthoritySecret(),
        counter: 1,
      }),
    );
  });

  it("refuses an admin op under the recovery authority (wrong tier)", async () => {
    await expectRejectedWithoutStateChange(
      await mintFor(client, fixture, "generate_keys", params, { secret: fixture.recoverySecret, counter: 1 }),
    );
  });

  it("refuses a capability bound to other params", async () => {
    const cap = await mintFor(client, fixture, "generate_keys", { ...params, count: 1 });
    await expectRejectedWithoutStateChange(cap);
  });

  it("refuses a capability minted for another op (of the same tier, bound to these params)", async () => {
    // Built by hand so that only `op` is wrong: export_backup is admin tier like generate_keys, the
    // binding is that of the generate_keys request actually sent, the signature is the admin
    // authority's, and the counter is the next one for generate_keys (counters are kept per op sent).
    const body: CapabilityBody = {
      ver: CAPABILITY_VERSION,
      authority: authorityPublicKey(fixture.adminSecret),
      op: "export_backup",
      request_id: "wrong-op",
      chain_id: CHAIN_ID,
      env_id: fixture.envId,
      instance_id: await instanceIdOf(client),
      scope: "admin",
      counter: await nextCounter(client, fixture.adminSecret, "generate_keys"),
      payload_binding: payloadBinding("generate_keys", params),
    };
    const sig = toHex(ed25519.sign(capabilitySigningPreimage(body), fixture.adminSecret));
    await expectRejectedWithoutStateChange({ ...body, sig });
  });

  it("refuses a capability naming another scope than its op's, signed by the op's own authority", async () => {
    // Counters are kept per (authority, env, scope, op): under the policy scope nothing was ever
    // accepted for generate_keys, so counter 1 is the next one there. Only the scope check refuses
    // it; accepted, it would start a second counter sequence for the op beside the admin one.
    const body: CapabilityBody = {
      ver: CAPABILITY_VERSION,
      authority: authorityPublicKey(fixture.adminSecret),
      op: "generate_keys",
      request_id: "wrong-scope",
      chain_id: CHAIN_ID,
      env_id: fixture.envId,
      instance_id: await instanceIdOf(client),
      scope: "policy",
      counter: 1,
      payload_binding: payloadBinding("generate_keys", params),
    };
    const sig = toHex(ed25519.sign(capabilitySigningPreimage(body), fixture.adminSecret));
    await expectRejectedWithoutStateChange({ ...body, sig });
  });

  it("refuses a version 1 capability, which names no enclave instance", async () => {
    // Exactly what a minter made before instance ids: valid signature, next counter, right binding.
    const body = {
      ver: 1,
      authority: authorityPublicKey(fixture.adminSecret),
      op: "generate_keys",
      request_id: "v1",
      chain_id: CHAIN_ID,
      env_id: fixture.envId,
      scope: "admin",
      counter: await nextCounter(client, fixture.adminSecret, "generate_keys"),
      payload_binding: payloadBinding("generate_keys", params),
    };
    const preimage = new Uint8Array([
      ...new TextEncoder().encode("svc-hsm/agent-cap/v1\0"),
      ...encodeCanonicalCbor(body),
    ]);
    await expectRejectedWithoutStateChange({
      ...body,
      sig: toHex(ed25519.sign(preimage, fixture.adminSecret)),
    });
  });

  it("refuses a capability for another enclave instance", async () => {
    // Same env, chain, authority and next counter: only the instance id is another one.
    await expectRejectedWithoutStateChange(
      await mintFor(client, fixture, "generate_keys", params, { instanceId: `0x${"ab".repeat(16)}` }),
    );
  });

  it("refuses a capability for another environment", async () => {
    // Counters are kept per (authority, env, scope, op): nothing was ever accepted for other-env,
    // so 1 is exactly the counter that env would expect. Only the env check can refuse this.
    await expectRejectedWithoutStateChange(
      await mintFor(client, fixture, "generate_keys", params, { envId: "other-env", counter: 1 }),
    );
  });

  it("refuses a capability for another chain", async () => {
    // The chain is not part of the counter key: the counter minted here is the valid next one.
    await expectRejectedWithoutStateChange(
      await mintFor(client, fixture, "generate_keys", params, { chainId: 1 }),
    );
  });

  it("refuses a tampered signature and a missing capability", async () => {
    const cap = await mintFor(client, fixture, "generate_keys", params);
    const flipped = `${cap.sig.slice(0, -1)}${cap.sig.endsWith("0") ? "1" : "0"}`;
    await expectRejectedWithoutStateChange({ ...cap, sig: flipped });
    await expectRejectedWithoutStateChange(undefined);
  });

  it("refuses restore_backup under the admin authority and accepts nothing without the recovery tier", async () => {
    const restoreParams = { package: new Uint8Array([1, 2, 3]) };
    const cap = await mintFor(client, fixture, "restore_backup", restoreParams, {
      secret: fixture.adminSecret,
    });
    const response = await client.request("restore_backup", restoreParams, cap);
    expect(response).toMatchObject({ ok: false, error: { code: "capability_rejected" } });
    expect(await nextCounter(client, fixture.recoverySecret, "restore_backup")).toBe(1);
  });

  it("keeps counters per op: export_backup starts at 1 after generate_keys advanced", async () => {
    expect(await nextCounter(client, fixture.adminSecret, "export_backup")).toBe(1);
  });
});
