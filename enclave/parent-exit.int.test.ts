import { existsSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { sleep } from "../shared/sleep.ts";
import { createEnclaveFixture, serveEnclave } from "../testing/enclave-process.ts";

// A throwaway enclave (the restore drill's, the one `npm start` runs at its start) follows its
// parent through its IPC channel: gone, the enclave deletes its folder (the restored keys beside
// its sealing key) and exits. A parent that died while the enclave was still starting had
// disconnected before the enclave listened for it, and the enclave ran on as an orphan with its
// keys on disk (seen after the suite: a launcher stopped during its start-up drill).
describe("a throwaway enclave whose parent is gone before it has started", () => {
  it("deletes its data folder and exits 0, never running on as an orphan", async () => {
    const fixture = await createEnclaveFixture({ start: false });
    const { child, exited } = await serveEnclave(fixture, {
      stdio: ["ignore", "ignore", "ignore", "ipc"],
      args: ["--throwaway"],
    });
    try {
      // The parent goes at once, while the enclave still loads and opens its state.
      child.disconnect();
      const outcome = await Promise.race([exited, sleep(20_000).then(() => "still running 20 s later")]);
      expect(outcome).toBe(0);
      expect(existsSync(fixture.dataDir)).toBe(false);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await fixture.dispose();
    }
  }, 60_000);
});
