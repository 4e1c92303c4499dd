import { existsSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { createEnclaveFixture, type EnclaveFixture, serveEnclave } from "../testing/enclave-process.ts";
import { nodePolicy } from "./testing/agent-policy.ts";
import { privileged } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// The enclave under a supervisor whose log collector goes away (docs/operations.md#logs): its log
// lines meet a closed pipe (EPIPE). It must go on signing and sealing, and stop as usual at
// SIGTERM, its state sealed and its socket removed; only the lines are lost.

describe("the enclave process whose log's reader is gone (real process)", () => {
  let fixture: EnclaveFixture | undefined;
  afterAll(async () => {
    await fixture?.dispose();
  });

  it("seals what it is asked after its log's reader is gone, and stops at SIGTERM with exit 0", async () => {
    fixture = await createEnclaveFixture({ envId: "closed-output", start: false });
    const { child, exited } = await serveEnclave(fixture, {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, LOG_LEVEL: "info" },
      listening: true,
    });
    // Nobody reads its log from here on.
    child.stderr!.destroy();
    child.stdout!.destroy();
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    // A privileged op logs "capability accepted" (info) as it seals the counter and the policy.
    await privileged(client, fixture, "configure_policy", nodePolicy());
    const policy = expectOk(await client.request("get_policy", {}));
    client.close();
    expect(child.exitCode).toBeNull();

    const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
    child.kill("SIGTERM");
    const code = await exited;
    clearTimeout(timer);
    expect(code).toBe(0);
    expect(existsSync(fixture.socketPath)).toBe(false);

    // Its state was sealed: the same data folder serves the policy it was given.
    await fixture.start();
    const again = await RawEnclaveClient.connect(fixture.socketPath);
    expect(expectOk(await again.client.request("get_policy", {}))).toEqual(policy);
    again.client.close();
  }, 60_000);

  it("with a reader that stops reading (its pipe full), still stops at SIGTERM with exit 0, its socket removed", async () => {
    const stalled = await createEnclaveFixture({ envId: "stalled-output", start: false });
    try {
      const { child, exited } = await serveEnclave(stalled, {
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, LOG_LEVEL: "info" },
        listening: true,
      });
      child.stdout!.resume();
      // A log collector that stalls without closing: the pipe fills and stays full.
      child.stderr!.pause();
      // Each refused hello logs a line: a thousand fill the pipe's 64 KiB.
      for (let i = 0; i < 1_000; i++) {
        const { client } = await RawEnclaveClient.connect(stalled.socketPath, { helloProfile: "wrong" });
        await client.closed;
      }
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      const started = Date.now();
      child.kill("SIGTERM");
      const code = await exited;
      clearTimeout(timer);
      expect(code).toBe(0);
      expect(Date.now() - started).toBeLessThan(8_000);
      expect(existsSync(stalled.socketPath)).toBe(false);
    } finally {
      await stalled.dispose();
    }
  }, 90_000);
});
