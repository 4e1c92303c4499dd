import { DEFAULT_REQUEST_TIMEOUT_MSEC } from "@modelcontextprotocol/sdk/shared/protocol.js";
import { describe, expect, it } from "vitest";
import { runTool } from "../testing/run-tool.ts";
import {
  DEFAULT_HOST_TIMEOUT_SECONDS,
  MAX_HOST_TIMEOUT_SECONDS,
  MIN_HOST_TIMEOUT_SECONDS,
  parseHostTimeout,
  toolCallTimings,
} from "./host-timeout.ts";

// The MCP server's tests that wait a deadline out run with a host of 20 s (mcp/stalled-gateway,
// retry-after-deadline, the MCP server's `wait: true`); these say what the same arithmetic gives a
// host that keeps the official client's default.

const TOKEN = `agt_${"ab".repeat(8)}_${"cd".repeat(32)}`;

describe("a tool call's time inside its host's request timeout", () => {
  it("by default fits the official client's own timeout: a call ends at 50 s, a wait until an action ends at 45 s, a numeric wait up to the gateway's 30 s", () => {
    expect(DEFAULT_HOST_TIMEOUT_SECONDS * 1000).toBe(DEFAULT_REQUEST_TIMEOUT_MSEC);
    expect(toolCallTimings(DEFAULT_HOST_TIMEOUT_SECONDS)).toEqual({
      deadlineMs: 50_000,
      waitUntilEndedMs: 45_000,
      maxWaitSeconds: 30,
    });
  });

  it.each([MIN_HOST_TIMEOUT_SECONDS, 30, DEFAULT_HOST_TIMEOUT_SECONDS, MAX_HOST_TIMEOUT_SECONDS])(
    "a host of %i s: the wait ends before the call's deadline, and the deadline 10 s before the host gives up",
    (seconds) => {
      const timings = toolCallTimings(seconds);
      expect(timings.deadlineMs).toBe((seconds - 10) * 1000);
      expect(timings.waitUntilEndedMs).toBeLessThan(timings.deadlineMs);
      expect(timings.waitUntilEndedMs).toBeGreaterThan(0);
      expect(timings.maxWaitSeconds * 1000).toBeLessThanOrEqual(timings.waitUntilEndedMs);
    },
  );

  it.each(["", undefined])("unset (%j) is the default", (value) => {
    expect(parseHostTimeout(value)).toEqual({ seconds: DEFAULT_HOST_TIMEOUT_SECONDS });
  });

  it.each(["19", "3601", "30.5", "-40", "60s", " 60", "1e2"])("refuses %j", (value) => {
    expect(parseHostTimeout(value)).toMatchObject({
      refused: expect.stringContaining(
        "AGENT_MCP_HOST_TIMEOUT_SECONDS must be whole seconds from 20 to 3600",
      ),
    });
  });

  it("npm run mcp refuses a host timeout it cannot fit in, exit 2, before it serves", async () => {
    // Mutation: without the check the server starts with a deadline past the host's timeout.
    const run = await runTool("mcp/main.ts", [], {
      env: {
        AGENT_BASE_URL: "http://127.0.0.1:9/77",
        AGENT_TOKEN: TOKEN,
        AGENT_MCP_HOST_TIMEOUT_SECONDS: "10",
      },
      cleanEnv: true,
      stdin: "",
      timeoutMs: 30_000,
    });
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr).toContain("agent-wallet mcp: AGENT_MCP_HOST_TIMEOUT_SECONDS must be whole seconds");
    expect(run.stderr).not.toContain(TOKEN);
    expect(run.stdout).toBe("");
  });
});
