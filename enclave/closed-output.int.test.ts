import { existsSync } from "node:fs";
import { afterAll, describe, expect, it } from "vitest";
import { LOG_QUEUE_MAX_BYTES } from "../shared/node/unread-output.ts";
import {
  createEnclaveFixture,
  type EnclaveFixture,
  type ServingEnclave,
  serveEnclave,
} from "../testing/enclave-process.ts";
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

  // Its log's destination holds at most LOG_QUEUE_MAX_BYTES of lines a stalled reader has not
  // taken and drops the rest (shared/node/unread-output.ts), as the origin's does: without the
  // bound it held every line of the stall in its memory, for as long as the stall lasted.
  it("with a reader that stalls, holds at most a bounded backlog of its lines for it (the rest dropped), answers all the while, and stops at SIGTERM", async () => {
    const stalled = await createEnclaveFixture({ envId: "bounded-output", start: false });
    let serving: ServingEnclave | undefined;
    try {
      serving = await serveEnclave(stalled, {
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, LOG_LEVEL: "info" },
        listening: true,
      });
      const { child, exited } = serving;
      child.stdout!.resume();
      let received = "";
      child.stderr!.on("data", (chunk: Buffer) => {
        received += chunk.toString();
      });
      child.stderr!.pause();
      // Its output read to the end, which may come after the exit.
      const readToEnd = new Promise<void>((resolve) => child.stderr!.once("end", resolve));
      const linesOf = (msg: string): string[] =>
        received.split("\n").filter((line) => line.includes(`"msg":"${msg}"`));
      const backlogBytes = (): number =>
        linesOf("client hello refused").reduce((sum, line) => sum + line.length + 1, 0);
      // The bound, and what the pipe and the test's paused stream held (some 100 KiB).
      const mostBacklog = LOG_QUEUE_MAX_BYTES + 512 * 1024;

      // About 85 bytes of log a refused hello: 36,000 write 3 MB while the reader stalls, far
      // past the bound and what the pipe and the test's paused stream take.
      const hellos = 36_000;
      let next = 0;
      const caller = async (): Promise<void> => {
        while (next < hellos) {
          next++;
          const { client } = await RawEnclaveClient.connect(stalled.socketPath, { helloProfile: "wrong" });
          await client.closed;
        }
      };
      await Promise.all(Array.from({ length: 8 }, caller));
      // It answers all the while: a hello it accepts is still answered.
      const { client } = await RawEnclaveClient.connect(stalled.socketPath);
      expectOk(await client.request("get_policy", {}));
      client.close();

      // The collector reads again. Once caught up, the enclave says how many lines it dropped; one
      // that held them all delivers more than the bound instead.
      child.stderr!.resume();
      await expect
        .poll(() => linesOf("log lines dropped").length > 0 || backlogBytes() >= mostBacklog, {
          timeout: 30_000,
        })
        .toBe(true);
      expect(backlogBytes()).toBeLessThan(mostBacklog);
      // With the dropped lines counted, every refusal's line.
      const dropped = linesOf("log lines dropped").reduce(
        (sum, line) => sum + (JSON.parse(line) as { dropped_lines: number }).dropped_lines,
        0,
      );
      expect(linesOf("client hello refused").length + dropped).toBeGreaterThanOrEqual(hellos);

      // Caught up, it stops as usual, its last lines getting through.
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      child.kill("SIGTERM");
      const code = await exited;
      clearTimeout(timer);
      expect(code).toBe(0);
      await readToEnd;
      expect(received).toContain('"msg":"enclave stopped"');
    } finally {
      if (serving?.child.exitCode === null) serving.child.kill("SIGKILL");
      await stalled.dispose();
    }
  }, 180_000);
});
