import { symlink } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { sleep } from "../shared/sleep.ts";
import { createEnclaveFixture, type EnclaveFixture, serveEnclave } from "../testing/enclave-process.ts";
import { socketAccepts } from "./socket-probe.ts";

// Two enclaves serving one data folder would each hold the sealed state in memory and write it over
// the other's, so every daily limit would hold once per enclave. The second start is refused with
// the first still serving; a first that died leaves nothing behind that refuses the next.

const fixtures: EnclaveFixture[] = [];
afterEach(async () => {
  for (const fixture of fixtures.splice(0)) await fixture.dispose();
});

async function servingFixture(): Promise<EnclaveFixture> {
  const fixture = await createEnclaveFixture();
  fixtures.push(fixture);
  return fixture;
}

/**
 * Starts `enclave serve` on `dataDir` at a socket of its own: its exit code, or "served" (and it is
 * stopped) once its socket accepts connections.
 */
async function secondServe(fixture: EnclaveFixture, dataDir: string, socketName: string) {
  const socketPath = join(fixture.dir, socketName);
  let stderr = "";
  const { child, exited } = await serveEnclave(
    { socketPath, dataDir },
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const serving = (async () => {
    while (child.exitCode === null && !(await socketAccepts(socketPath))) await sleep(50);
    return "served" as const;
  })();
  const code = await Promise.race([exited, serving]);
  if (code === "served") {
    child.kill("SIGTERM");
    await exited;
  }
  return { code, stderr };
}

describe("one enclave per data folder", () => {
  it("refuses a second enclave on a served folder at another socket, and the first serves on", async () => {
    const fixture = await servingFixture();
    const second = await secondServe(fixture, fixture.dataDir, "second.sock");
    expect(second.code).toBe(2);
    expect(second.stderr).toContain(`another enclave is serving ${fixture.dataDir}`);
    expect(await socketAccepts(fixture.socketPath)).toBe(true);
  });

  it("knows the folder through a symlink to it", async () => {
    const fixture = await servingFixture();
    const alias = join(fixture.dir, "alias");
    await symlink(fixture.dataDir, alias);
    const second = await secondServe(fixture, alias, "second.sock");
    expect(second.code).toBe(2);
    expect(second.stderr).toContain("another enclave is serving");
  });

  it("serves the folder again at once after its enclave was SIGKILLed: no lock outlives it", async () => {
    const fixture = await servingFixture();
    await fixture.kill();
    const { child, exited } = await serveEnclave(
      { socketPath: join(fixture.dir, "after.sock"), dataDir: fixture.dataDir },
      { stdio: ["ignore", "ignore", "ignore"], listening: true },
    );
    try {
      expect(await socketAccepts(join(fixture.dir, "after.sock"))).toBe(true);
    } finally {
      child.kill("SIGTERM");
      expect(await exited).toBe(0);
    }
  });
});
