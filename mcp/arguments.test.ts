import { describe, expect, it } from "vitest";
import { runTool } from "../testing/run-tool.ts";

// `npm run mcp -- --help`, as an operator types it after the other tools' --help: the server took
// no arguments and ignored them, so it served the protocol on a terminal, silent, whatever was
// typed. Nothing need listen: the server's process alone.

const TOKEN = `agt_${"ab".repeat(8)}_${"cd".repeat(32)}`;

describe("npm run mcp with arguments", () => {
  // Mutation: without the check the server starts, and ends 0 with nothing printed when stdin closes.
  it.each(["--help", "-h"])(
    "%s prints how to run it on stdout and exits 0, serving nothing",
    async (flag) => {
      const run = await runTool("mcp/main.ts", [flag], { cleanEnv: true, stdin: "", timeoutMs: 30_000 });
      expect(run.code, run.stderr).toBe(0);
      expect(run.stdout).toContain(
        "usage: AGENT_TOKEN=agt_… AGENT_BASE_URL=http://127.0.0.1:8787/77 npm run mcp",
      );
      expect(run.stderr).toBe("");
    },
  );

  it("refuses any other argument, exit 2, before it serves", async () => {
    const run = await runTool("mcp/main.ts", ["--token", TOKEN], {
      env: { AGENT_BASE_URL: "http://127.0.0.1:9/77", AGENT_TOKEN: TOKEN },
      cleanEnv: true,
      stdin: "",
      timeoutMs: 30_000,
    });
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toContain("agent-wallet mcp: takes no arguments");
    expect(run.stderr).not.toContain(TOKEN);
    expect(run.stdout).toBe("");
  });
});
