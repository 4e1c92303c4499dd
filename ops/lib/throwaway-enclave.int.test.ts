import { readdir, readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createSignerClient } from "../../origin/signer/create-signer-client.ts";
import type { SealedIdentity } from "../../origin/signer/types.ts";
import { type EnclaveProcess, startEnclaveProcess } from "../../testing/enclave-process.ts";
import { startThrowawayEnclave } from "./throwaway-enclave.ts";

/** The environment of every process whose command line names `dir`, as NAME=value lines. */
async function environmentsOf(dir: string): Promise<string[][]> {
  const found: string[][] = [];
  for (const pid of await readdir("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (!cmdline.includes(dir)) continue;
    const environ = await readFile(`/proc/${pid}/environ`, "utf8").catch(() => "");
    found.push(environ.split("\0").filter(Boolean));
  }
  return found;
}

describe("the restore drill's throwaway enclave (real enclave program)", () => {
  let live: EnclaveProcess;
  let identity: SealedIdentity;

  beforeAll(async () => {
    live = await startEnclaveProcess({ envId: "throwaway-env" });
    const signer = createSignerClient({ endpoint: `unix://${live.socketPath}`, liveIdentityEnabled: true });
    const sealed = await signer.getSealedIdentity();
    await signer.close();
    if (!sealed.ok) throw new Error(sealed.error.reason);
    identity = sealed.value;
  });
  afterAll(async () => {
    vi.unstubAllEnvs();
    await live?.dispose();
  });

  it("gets none of the drill's secrets in its environment: not the database password, not the node's secrets", async () => {
    // The drill runs with the node's configuration (nodeConfig reads DATABASE_URL and the rest).
    vi.stubEnv("DATABASE_URL", "postgres://agents:db-password-not-for-the-enclave@127.0.0.1:5432/agents");
    vi.stubEnv("AGENT_REGISTRATION_ADMIN_SECRET", "registration-admin-secret-not-for-the-enclave");
    const throwaway = await startThrowawayEnclave({ identity });
    try {
      const environments = await environmentsOf(throwaway.dir);
      expect(environments.length).toBeGreaterThan(0);
      for (const environment of environments) {
        expect(environment.join("\n")).not.toContain("not-for-the-enclave");
      }
    } finally {
      await throwaway.close();
    }
  });
});
