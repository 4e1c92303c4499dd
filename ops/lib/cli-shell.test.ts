import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { REPO_ROOT } from "../../testing/enclave-process.ts";
import { runTool } from "../../testing/run-tool.ts";
import { DEBUG_ENV, EXIT_CODES, redact } from "./cli-shell.ts";
import { programArgs } from "./program-bundles.mjs";

// Each case runs testing/cli-shell-probe.ts as a child process, from its bundle as the tools run:
// the exit code is what a script or a runbook sees, so it is read from a real process, not from a
// function's return value.
const PROBE = "testing/cli-shell-probe.ts";
const PASSWORD = "s3cret-passw0rd";
const TOKEN = "probe-api-token-0123456789";
const AGENT_TOKEN = `agt_${"a".repeat(32)}_${"b".repeat(64)}`;
const env = {
  // Port 1 on the loopback: nobody listens, the connection is refused at once.
  PROBE_DATABASE_URL: `postgres://operator:${PASSWORD}@127.0.0.1:1/agents`,
  PROBE_API_TOKEN: TOKEN,
  [DEBUG_ENV]: undefined,
  PROBE_EXIT_CODES: undefined,
};
const USAGE = "usage: probe CASE [options]\n";

type Case = {
  name: string;
  args: string[];
  env?: Record<string, string>;
  code: number;
  stdout?: string;
  /** The whole of stderr, or a pattern it must match. */
  stderr: string | RegExp;
};

const cases: Case[] = [
  { name: "done", args: ["done"], code: 0, stdout: "probe: done\n", stderr: "" },
  {
    name: "refused, with its message",
    args: ["refused"],
    code: 1,
    stdout: "",
    stderr: "probe: no agent 7\n",
  },
  {
    name: "refused, said in the tool's own report",
    args: ["refused-in-its-report"],
    code: 1,
    stdout: "probe: batch 7: refused: hash_mismatch\nprobe: 0 restored, 1 refused\n",
    stderr: "",
  },
  {
    name: "a usage error: its message, then the usage",
    args: ["usage"],
    code: 2,
    stdout: "",
    stderr: `probe: --reason is required\n${USAGE}`,
  },
  {
    name: "an unknown option (node's parseArgs)",
    args: ["unknown-option", "--reasn", "x"],
    code: 2,
    stderr: `probe: Unknown option '--reasn'\n${USAGE}`,
  },
  { name: "an unknown case", args: ["bogus"], code: 2, stderr: `probe: unknown case 'bogus'\n${USAGE}` },
  {
    name: "a key file that does not read, its text never shown",
    args: ["unreadable-key", "/nonexistent/key", "KEY-TEXT-0123"],
    code: 2,
    stderr: `probe: cannot read --key /nonexistent/key (not a 32-byte hex seed)\n${USAGE}`,
  },
  {
    name: "an infrastructure failure met as data",
    args: ["errored"],
    code: 3,
    stderr: "probe: error: get_policy: signer_unreachable\n",
  },
  {
    name: "the database unreachable (a real driver)",
    args: ["database"],
    code: 3,
    stdout: "",
    stderr: "probe: error: connect ECONNREFUSED 127.0.0.1:1\n",
  },
  {
    name: "secrets in the messages of an error and its cause",
    args: ["secret-in-message"],
    code: 3,
    stderr:
      "probe: error: could not use postgres://operator:[redacted]@127.0.0.1:1/agents with [redacted] " +
      "for agt_[redacted]: the server said: secret [redacted]\n",
  },
  { name: "a thrown string", args: ["throws-string"], code: 3, stderr: "probe: error: a bare string\n" },
  {
    name: "a message of several lines, on one",
    args: ["multi-line"],
    code: 3,
    stderr: "probe: error: first line second line\n",
  },
  {
    name: "an exception outside the run (a timer)",
    args: ["uncaught-in-timer"],
    code: 3,
    stderr: "probe: error: from a timer nobody awaited\n",
  },
  {
    name: "a rejection nobody awaited",
    args: ["unhandled-rejection"],
    code: 3,
    stderr: "probe: error: a rejection nobody awaited\n",
  },
  {
    name: "a run that never says how it ended",
    args: ["unsettled"],
    code: 3,
    stderr: "probe: error: the run ended without an outcome (a bug)\n",
  },
  {
    name: `${DEBUG_ENV}=1: the stack and the causes, still without secrets`,
    args: ["secret-in-message"],
    env: { [DEBUG_ENV]: "1" },
    code: 3,
    stderr:
      /^probe: error: Error: could not use postgres:\/\/operator:\[redacted\]@.*\n {4}at .*\[cause\]: Error: the server said: secret \[redacted\]/s,
  },
  // A tool whose codes a specification fixes (the canary) keeps its numbers for the same endings.
  ...(
    [
      ["done", 0],
      ["refused", 1],
      ["usage", 64],
      ["database", 2],
      ["errored", 2],
    ] as const
  ).map(
    ([args, code]): Case => ({
      name: `with its own numbers: ${args} exits ${code}`,
      args: [args],
      env: { PROBE_EXIT_CODES: JSON.stringify({ usage: 64, error: 2 }) },
      code,
      stderr: /.*/s,
    }),
  ),
];

describe("the operators' CLI shell (ops/lib/cli-shell.ts)", () => {
  it.each(cases)("$name: exit $code", async (row) => {
    const run = await runTool(PROBE, row.args, { env: { ...env, ...row.env }, timeoutMs: 30_000 });
    expect(run.code).toBe(row.code);
    if (row.stdout !== undefined) expect(run.stdout).toBe(row.stdout);
    if (typeof row.stderr === "string") expect(run.stderr).toBe(row.stderr);
    else expect(run.stderr).toMatch(row.stderr);
    for (const secret of [PASSWORD, TOKEN, AGENT_TOKEN, "KEY-TEXT-0123"]) {
      expect(run.stdout + run.stderr).not.toContain(secret);
    }
  });

  it("on SIGINT runs the tool's cleanup, then exits 130", async () => {
    const child = spawn(process.execPath, [...programArgs(path.join(REPO_ROOT, PROBE)), "interruptible"], {
      cwd: REPO_ROOT,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
    await new Promise<void>((resolve) => {
      child.stdout.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
        if (stdout.includes("probe: waiting\n")) resolve();
      });
    });
    child.kill("SIGINT");
    expect(await exited).toBe(EXIT_CODES.interrupted);
    expect(stdout).toBe("probe: waiting\nprobe: cleaned up\n");
    expect(stderr).toBe("probe: interrupted (SIGINT)\n");
  });
});

describe("redact", () => {
  const secrets = {
    DATABASE_URL: "postgres://agent:pa%24%24word-1234@db.internal:5432/agents",
    AGENT_ADMIN_API_TOKEN: "t".repeat(40),
    AGENT_EDGE_SHARED_SECRET: "e".repeat(40),
    SHORT_SECRET: "abc",
    AGENT_ENV_ID: "prod-eu-1",
  };
  it.each([
    ["a secret variable's value", `token ${"t".repeat(40)} refused`, "token [redacted] refused"],
    ["a URL's password", "postgres://u:hunter2@h/db", "postgres://u:[redacted]@h/db"],
    ["the database URL's password, decoded", "password pa$$word-1234 failed", "password [redacted] failed"],
    ["an agent token", `bearer ${AGENT_TOKEN}`, "bearer agt_[redacted]"],
    ["a short secret (too common a string to replace)", "abc is fine", "abc is fine"],
    ["a variable that is no secret", "env prod-eu-1", "env prod-eu-1"],
  ])("%s", (_what, text, expected) => {
    expect(redact(text, secrets)).toBe(expected);
  });
});

describe("docs/operations.md#exit-codes-of-the-operator-tools", () => {
  it("documents the shell's codes, each with its name", () => {
    const doc = readFileSync(path.join(REPO_ROOT, "docs/operations.md"), "utf8");
    const start = doc.indexOf("\n## Exit codes of the operator tools\n");
    expect(start).toBeGreaterThan(0);
    const section = doc.slice(start + 1, doc.indexOf("\n## ", start + 1));
    const documented = Object.fromEntries(
      [...section.matchAll(/^\| `(\d+)` +\| (\w+) +\|/gm)].map(([, code, name]) => [name!, Number(code)]),
    );
    expect(documented).toEqual(EXIT_CODES);
  });
});
