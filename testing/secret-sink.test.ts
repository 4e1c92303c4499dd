import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { recordOutput, recordSecret, recordSecretsOf, SINK_ENV, scanSink } from "./secret-sink.ts";

// The scan that ends every run (global-setup.ts): proven here on a sink of its own, with a token
// and a secret logged on purpose.
describe("the suite's secret scan", () => {
  let dir: string;
  let before: string | undefined;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "sink-test-"));
    before = process.env[SINK_ENV];
    process.env[SINK_ENV] = dir;
  });
  afterEach(async () => {
    process.env[SINK_ENV] = before;
    await rm(dir, { recursive: true, force: true });
  });

  it("finds a token logged on purpose, a configured secret in an error body, and nothing in clean output", () => {
    const token = `agt_${"ab".repeat(16)}_${"cd".repeat(32)}`;
    const adminToken = "f".repeat(64);
    recordSecretsOf({ AGENT_ADMIN_API_TOKEN: adminToken, LOG_LEVEL: "info" });
    recordSecret("e".repeat(64));
    recordOutput("origin", '{"msg":"request","status":401}');
    expect(scanSink(dir)).toEqual([]);

    recordOutput("origin", `{"msg":"auth failed","authorization":"Bearer ${token}"}`);
    recordOutput("error body", `{"error":{"message":"bad ${adminToken}"}}`);
    expect(scanSink(dir)).toEqual([
      expect.objectContaining({ source: "origin", what: "agt_abab… (101 characters)" }),
      expect.objectContaining({ source: "error body", what: "ffffffff… (64 characters)" }),
    ]);
  });
});
