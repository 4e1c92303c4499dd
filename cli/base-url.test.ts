import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { runTool } from "../testing/run-tool.ts";

// The base URL an agent pastes is the first thing it can get wrong: `localhost:8787/77` without its
// scheme, or another scheme. The bin in its own process, as an agent runs it; nothing is listening
// and nothing need be, since the CLI must refuse before it sends anything.

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");
const TOKEN = `agt_${"ab".repeat(8)}_${"cd".repeat(32)}`;

describe("agent-wallet with a base URL that is not http(s)", () => {
  // Mutation: without the check, `localhost:8787/77` is sent as `null8787/77/…` and the command
  // exits 19 (ServiceUnavailable: "run the same command with --key K"), which no retry can mend.
  it.each([
    ["balance", "localhost:8787/77"],
    ["transfer", "127.0.0.1:8787/77"],
    ["balance", "ftp://127.0.0.1:8787/77"],
  ])(
    "%s with AGENT_BASE_URL=%s is a usage error (exit 2) naming what to set, nothing sent",
    async (command, base) => {
      const args =
        command === "transfer" ? ["transfer", "--to", `0x${"11".repeat(20)}`, "--amount", "1"] : [command];
      const run = await runTool(BIN, args, {
        env: { AGENT_BASE_URL: base, AGENT_TOKEN: TOKEN },
        cleanEnv: true,
        timeoutMs: 60_000,
      });
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toContain(
        "the base URL must be an http:// or https:// URL, such as http://127.0.0.1:8787/77",
      );
      expect(run.stdout).toBe("");
    },
  );
});
