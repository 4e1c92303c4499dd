import { describe, expect, it } from "vitest";
import { runTool } from "../testing/run-tool.ts";
import { SOAK_USAGE } from "./args.ts";

// `npm run soak` with a command line it cannot run: one line naming the flag, the usage, exit 1,
// and nothing started (the line is checked before the stack is).

describe("npm run soak: a command line it cannot run", () => {
  it.each([
    [["--seconds", "5", "--concurrency", "0.4"], "--concurrency must be a whole number of at least 1"],
    [["--seconds", "5", "--concurrency", "2.5"], "--concurrency must be a whole number of at least 1"],
    [["--seconds", "5", "--agents", "1"], "--agents must be a whole number of at least 2"],
    [["--seconds", "5", "--payers", "0.2"], "--payers must be a whole number of at least 1"],
    [["--seconds", "5", "--rate", "abc"], "--rate must be a positive number"],
    [["--minute", "1"], "Unknown option '--minute'"],
  ])(
    "refuses %j: %s",
    async (args, message) => {
      const run = await runTool("soak/main.ts", args, { timeoutMs: 60_000 });
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toContain(`[soak] failed: ${message}`);
      expect(run.stderr).toContain(SOAK_USAGE);
      expect(run.stderr).not.toMatch(/\n\s+at /);
      expect(run.stdout).not.toContain("stack output goes to");
    },
    90_000,
  );

  it.each(["--help", "-h"])(
    "%s prints the usage on stdout and exits 0, starting nothing",
    async (flag) => {
      const run = await runTool("soak/main.ts", [flag], { timeoutMs: 60_000 });
      expect(run).toEqual({ code: 0, stdout: `${SOAK_USAGE}\n`, stderr: "" });
    },
    90_000,
  );
});
