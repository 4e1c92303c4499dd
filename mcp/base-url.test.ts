import { describe, expect, it } from "vitest";
import { runTool } from "../testing/run-tool.ts";

// `npm run mcp` as an MCP host starts it, with a base URL pasted without its scheme. Nothing need
// listen: the server must refuse at start rather than answer every tool call "unreachable, call
// again".

const TOKEN = `agt_${"ab".repeat(8)}_${"cd".repeat(32)}`;

describe("npm run mcp with a base URL that is not http(s)", () => {
  // Mutation: without the check the server starts, and ends 0 when the host closes its stdin.
  it.each(["localhost:8787/77", "ftp://127.0.0.1:8787/77"])(
    "AGENT_BASE_URL=%s: exits 2 at start, saying what the variable must be",
    async (base) => {
      const run = await runTool("mcp/main.ts", [], {
        env: { AGENT_BASE_URL: base, AGENT_TOKEN: TOKEN },
        cleanEnv: true,
        stdin: "",
        timeoutMs: 30_000,
      });
      expect(run.code, run.stderr).toBe(2);
      expect(run.stderr).toContain("AGENT_BASE_URL must be an http:// or https:// URL");
      expect(run.stdout).toBe("");
    },
  );

  // Mutation: without the check the server starts, and every tool call then answers
  // ServiceUnavailable "no answer from GET http://127.0.0.1:8787/77/…" (fetch refuses to build a
  // request from a URL with credentials), whose advice is to call again, for ever.
  it("AGENT_BASE_URL with a user and password: exits 2 at start, saying why, the password in no line", async () => {
    const run = await runTool("mcp/main.ts", [], {
      env: { AGENT_BASE_URL: "http://agent:pa55word@127.0.0.1:8787/77", AGENT_TOKEN: TOKEN },
      cleanEnv: true,
      stdin: "",
      timeoutMs: 30_000,
    });
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toContain("AGENT_BASE_URL must not carry a user or password");
    expect(`${run.stdout}${run.stderr}`).not.toContain("pa55word");
    expect(run.stdout).toBe("");
  });
});
