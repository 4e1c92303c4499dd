import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runTool } from "../testing/run-tool.ts";

/**
 * An operator tool that finds no enclave says where it looked and what to check, not only the
 * socket's error code: the operator runs it on the node, so the path is theirs to read.
 */
describe("an operator tool that cannot reach the enclave", () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "enclave-unreachable-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("names the socket it tried from --socket and says how to start the stack or choose another", async () => {
    const socket = path.join(dir, "absent.sock");
    const run = await runTool("ops/enclave-policy.ts", ["show", "--socket", socket], { timeoutMs: 60_000 });
    expect(run.code).toBe(3);
    expect(run.stderr).toContain(`cannot reach the enclave (ENOENT) at ${socket}`);
    expect(run.stderr).toMatch(/is the stack started \(npm start\)\?/);
    expect(run.stderr).toMatch(/--socket PATH or AGENT_SIGNER_SVC_HSM_ENDPOINT/);
  });

  it("names the socket it tried from AGENT_SIGNER_SVC_HSM_ENDPOINT", async () => {
    const socket = path.join(dir, "from-endpoint.sock");
    const run = await runTool("ops/recover.ts", ["transport-key"], {
      env: { AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${socket}` },
      timeoutMs: 60_000,
    });
    expect(run.code).toBe(3);
    expect(run.stderr).toContain(`cannot reach the enclave (ENOENT) at ${socket}`);
    expect(run.stderr).toMatch(/is the stack started \(npm start\)\?/);
  });
});
