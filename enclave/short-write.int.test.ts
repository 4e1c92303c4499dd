import { type ChildProcess, spawn } from "node:child_process";
import { rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { programArgs } from "../ops/lib/program-bundles.mjs";
import { sleep } from "../shared/sleep.ts";
import { createEnclaveFixture, type EnclaveFixture, REPO_ROOT } from "../testing/enclave-process.ts";
import { dataDirLayout } from "./data-dir.ts";
import { socketAccepts } from "./socket-probe.ts";
import { type AgentKey, agentKeys, nodePolicy, transfer } from "./testing/agent-policy.ts";
import { privileged } from "./testing/capabilities.ts";
import { expectOk, RawEnclaveClient } from "./testing/raw-client.ts";

// A write the disk takes only in part (it filled up, or a file size limit) resolves without an
// error: the kernel writes what fits and says how much. The file size limit makes that happen for
// real here: the enclave is run under `ulimit -f`, so the state journal's append that reaches the
// limit is taken in part. A signature answered must still have its count on disk, whatever the
// enclave does next: here it is killed at once, and started again without the limit.

/** The journal's records, and so the limit, stay far below its 256 KiB: appends reach it in turn. */
const FILE_SIZE_LIMIT_KIB = 16;

/** `enclave serve` on the fixture's folder and socket, as a command line from the program on. */
function serveArgs(fixture: EnclaveFixture): string[] {
  return [
    ...programArgs(join(REPO_ROOT, "enclave/main.ts")),
    ...["serve", "--socket", fixture.socketPath, "--data-dir", fixture.dataDir],
  ];
}

/** The enclave program on the fixture's folder and socket, writing no byte past the limit. */
async function startLimited(fixture: EnclaveFixture): Promise<ChildProcess> {
  const args = serveArgs(fixture);
  const child = spawn(
    "sh",
    ["-c", `ulimit -f ${FILE_SIZE_LIMIT_KIB} && exec "$0" "$@"`, process.execPath, ...args],
    { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "ignore"], env: { ...process.env, LOG_LEVEL: "warn" } },
  );
  while (!(await socketAccepts(fixture.socketPath))) {
    if (child.exitCode !== null) throw new Error(`enclave exited with code ${child.exitCode}`);
    await sleep(50);
  }
  return child;
}

describe("a state write the disk takes only in part (real process under a file size limit)", () => {
  let fixture: EnclaveFixture;
  let key: AgentKey;

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "short-write" });
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    await privileged(client, fixture, "configure_policy", nodePolicy());
    [key] = (await agentKeys(client, fixture, 1)) as [AgentKey];
    // A policy of its own, so get_agent_policy reads back what the enclave counted of the key.
    await privileged(client, fixture, "set_agent_policy", {
      key_ref: key.key_ref,
      policy: { transfers: { daily_count: 1000 } },
    });
    client.close();
    await fixture.stop();
  });
  afterAll(async () => {
    await fixture?.dispose();
  });

  it("answers no signature whose count the disk did not take whole: after a kill, every transfer answered signed is counted", async () => {
    const limited = await startLimited(fixture);
    const exited = new Promise((resolve) => limited.once("exit", resolve));
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    let signed = 0;
    for (let sent = 0; sent < 200; sent++) {
      const answer = await client.request("sign_transfer", transfer(key, 1_000n));
      if (!answer.ok) {
        expect(answer.error.code).toBe("seal_failed");
        break;
      }
      signed++;
    }
    // The first write the limit refused: killed before any other write could hold its count.
    limited.kill("SIGKILL");
    await exited;
    client.close();
    expect(signed).toBeGreaterThan(0);
    expect(signed).toBeLessThan(200);

    await fixture.start();
    const { client: after } = await RawEnclaveClient.connect(fixture.socketPath);
    const policy = expectOk(await after.request("get_agent_policy", { key_ref: key.key_ref }));
    after.close();
    expect((policy.usage as { transfers: { day_count: number } }).transfers.day_count).toBe(signed);
  });
});

/**
 * Below a first state write (about 400 bytes: the empty state naming the payee key) and above the
 * payee's key set (about 370 bytes), in bytes: prlimit sets it to the byte, where the shell's
 * ulimit counts blocks of 512 or 1024.
 */
const FIRST_WRITE_LIMIT_BYTES = 390;

describe("a folder's first state write taken in part (real process under a file size limit)", () => {
  let fixture: EnclaveFixture;

  beforeAll(async () => {
    fixture = await createEnclaveFixture({ envId: "short-first-write", start: false });
  });
  afterAll(async () => {
    await fixture?.dispose();
  });

  it("serves a folder whose only state slot its first write left torn, as one never written: the next start serves", async () => {
    const [slot] = dataDirLayout(fixture.dataDir).state.slots;
    // What an init killed after it made the payee key, before its first state write, leaves: no slot.
    await rm(slot);
    // The start writes its own payee key and then its first state: the disk takes that in part.
    const limited = spawn(
      "prlimit",
      [`--fsize=${FIRST_WRITE_LIMIT_BYTES}`, process.execPath, ...serveArgs(fixture)],
      { cwd: REPO_ROOT, stdio: ["ignore", "ignore", "ignore"], env: { ...process.env, LOG_LEVEL: "warn" } },
    );
    const code = await new Promise((resolve) => limited.once("exit", resolve));
    expect(code).toBe(1);
    expect((await stat(slot)).size).toBe(FIRST_WRITE_LIMIT_BYTES);

    // Mutation: a torn slot read as one sealed under another key refuses every start from here on
    // ("no state slot authenticates"), and `init` refuses the folder as initialised.
    await fixture.start().catch((error: unknown) => {
      throw new Error(`${String(error)}: ${fixture.stderr().trim()}`);
    });
    const { client } = await RawEnclaveClient.connect(fixture.socketPath);
    const policy = expectOk(await client.request("get_policy", {}));
    client.close();
    expect(policy.policy).toBeNull();
  });
});
