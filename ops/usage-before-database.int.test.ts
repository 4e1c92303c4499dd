import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, it } from "vitest";
import { freePort } from "../testing/free-port.ts";
import { runTool } from "../testing/run-tool.ts";

/**
 * A mistyped command line is answered before the tool opens the node's database: with no
 * DATABASE_URL, opening it would start the embedded cluster, and on a new machine create one, only
 * to print a usage error. Each line here is wrong in an argument that only its command reads.
 *
 * The lines run beside each other: each is one process of its own, with its own cluster folder (and
 * port) that must stay absent, and reads nothing another writes. `it.for` hands each its context,
 * whose `expect` it takes (docs/development.md, "Tests that run beside each other").
 */
describe("the operator tools check a command line before they open the database", {
  concurrent: true,
}, () => {
  let dir: string;
  let cases = 0;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "usage-before-db-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const AGENT = "00000000-0000-4000-8000-000000000000";
  const WALLET = `0x${"ab".repeat(20)}`;
  it.for<[string, string[], RegExp]>([
    ["ops/agents.ts", ["create"], /--capabilities is required/],
    ["ops/agents.ts", ["create", "--capabilities", "read,admin"], /not 'admin'/],
    ["ops/agents.ts", ["disable", "--agent", AGENT], /--reason is required to disable/],
    ["ops/agents.ts", ["revoke", "--agent", "not-a-uuid", "--reason", "r"], /--agent must be an agent id/],
    ["ops/agents.ts", ["rotate-token"], /--agent must be an agent id/],
    [
      "ops/funding.ts",
      ["grant", "--wallet", WALLET, "--ceiling", "1", "--expires-in", "24h"],
      /--reason is required/,
    ],
    [
      "ops/funding.ts",
      ["grant", "--wallet", WALLET, "--ceiling", "1", "--expires-in", "soon", "--reason", "r"],
      /--expires-in must look like/,
    ],
    [
      "ops/funding.ts",
      [
        "grant",
        "--agent",
        AGENT,
        "--wallet",
        WALLET,
        "--ceiling",
        "1",
        "--expires-in",
        "1h",
        "--reason",
        "r",
      ],
      /give --wallet or --agent, not both/,
    ],
    ["ops/funding.ts", ["revoke", "--id", "x", "--reason", "r"], /--id must be an exception id/],
    ["ops/enclave-policy.ts", ["revoke-passkey", "pk-0123456789abcdef"], /revoke-passkey needs --reason/],
    // An expiry in the past, or past what a date holds (which the database met as "Invalid time
    // value", exit 3), is the line's mistake too.
    [
      "ops/funding.ts",
      [
        "grant",
        "--wallet",
        WALLET,
        "--ceiling",
        "1",
        "--expires-at",
        "2000-01-01T00:00:00Z",
        "--reason",
        "r",
      ],
      /--expires-at must be in the future/,
    ],
    [
      "ops/funding.ts",
      ["grant", "--wallet", WALLET, "--ceiling", "1", "--expires-in", "99999999999d", "--reason", "r"],
      /--expires-in is too far ahead/,
    ],
    [
      "ops/registration.ts",
      ["set", "per_ip_daily", "-1", "--reason", "r"],
      /per_ip_daily must be a whole number/,
    ],
    [
      "ops/registration.ts",
      ["set", "no_such_setting", "1", "--reason", "r"],
      /unknown setting 'no_such_setting'/,
    ],
    // A flag the command does not take was passed over: `list --wallet ADDR` listed every
    // exception as if filtered, `rotate-token --reason TEXT` recorded no reason.
    ["ops/agents.ts", ["list", "--agent", AGENT], /^agents: list takes no --agent\n/],
    ["ops/agents.ts", ["rotate-token", "--agent", AGENT, "--reason", "r"], /rotate-token takes no --reason/],
    ["ops/agents.ts", ["disable", "--agent", AGENT, "--reason", "r", "--json"], /disable takes no --json/],
    ["ops/funding.ts", ["list", "--wallet", WALLET], /^funding: list takes no --wallet\n/],
    ["ops/funding.ts", ["revoke", "--id", AGENT, "--reason", "r", "--all"], /revoke takes no --all/],
    ["ops/webhooks.ts", ["list", "--id", AGENT], /^webhooks: list takes no --id\n/],
    ["ops/webhooks.ts", ["retire-key", "--kid", "abc", "--reason", "r"], /retire-key takes no --reason/],
    [
      "ops/webhooks.ts",
      ["rotate-secret", "--id", "0b7c7d5e-0000-4000-8000-000000000001", "--overlap-hours", "1.5"],
      /--overlap-hours must be a whole number of hours from 0 to 168/,
    ],
    ["ops/x402-resources.ts", ["list", "--url", "https://example.com/a"], /list takes no --url/],
    [
      "ops/x402-resources.ts",
      ["remove", "--url", "https://example.com/a", "--json"],
      /remove takes no --json/,
    ],
    [
      "ops/registration.ts",
      ["set", "per_ip_daily", "5", "per_ip_daily", "6", "--reason", "r"],
      /^registration: per_ip_daily is named twice\n/,
    ],
    // The URL's own rules (scheme, credentials, a private address) need no database either.
    [
      "ops/webhooks.ts",
      ["add", "--url", "ftp://hooks.example.com/in", "--events", "action.confirmed"],
      /--url: only http: and https: URLs/,
    ],
    [
      "ops/webhooks.ts",
      ["add", "--url", "http://127.0.0.1:9/hook", "--events", "action.confirmed"],
      /AGENT_WEBHOOKS_ALLOW_PRIVATE=true/,
    ],
    // The console's bound on a URL's length, which the CLI did not apply.
    [
      "ops/webhooks.ts",
      ["add", "--url", `https://hooks.example.com/${"a".repeat(2_000)}`, "--events", "action.confirmed"],
      /--url must be at most 2000 characters, as in the console/,
    ],
  ])("%s %j: exit 2, and no cluster started", async ([tool, args, message], { expect }) => {
    // A folder of its own per line: a cluster one line started must not fail the lines after it.
    const clusterDir = path.join(dir, `pg-${cases++}`);
    const result = await runTool(tool, args, {
      env: {
        DATABASE_URL: undefined,
        EMBEDDED_PG_DIR: clusterDir,
        EMBEDDED_PG_PORT: String(await freePort()),
        LOG_LEVEL: "silent",
        AGENT_WEBHOOKS_ALLOW_PRIVATE: undefined,
      },
      timeoutMs: 60_000,
    });
    expect({ code: result.code, stderr: result.stderr }).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(message),
    });
    expect(existsSync(clusterDir)).toBe(false);
  });

  // A password with a `#` (or a space, a port past 65535) unencoded: the URL parser every driver
  // uses refuses it, which the tools reported as `error: Invalid URL`, exit 3, naming nothing.
  it.for([
    ["postgres://agents:pa#ssword-one@127.0.0.1:5432/agents", "pa#ssword-one"],
    ["postgres://agents:password-two@127.0.0.1:99999/agents", "password-two"],
  ])(
    "DATABASE_URL %s: exit 2 naming the variable, never its password",
    async ([url, password], { expect }) => {
      const result = await runTool("ops/x402-resources.ts", ["list"], {
        env: { DATABASE_URL: url, LOG_LEVEL: "silent" },
        timeoutMs: 60_000,
      });
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/x402-resources: invalid configuration:\n {2}- DATABASE_URL: /);
      expect(result.stderr).not.toContain(password);
    },
  );

  // recover read the endpoint itself and ended "recover: error: …", exit 3, for the same variable
  // the others call an invalid configuration.
  it.for<[string, string[], number]>([
    ["ops/recover.ts", ["transport-key"], 2],
    ["ops/enclave-policy.ts", ["show"], 2],
    ["ops/policy.ts", ["reseal"], 2],
    ["ops/canary.ts", [], 64],
  ])(
    "AGENT_SIGNER_SVC_HSM_ENDPOINT not unix://: %s %j exits %s (usage) naming the variable",
    async ([tool, args, code], { expect }) => {
      const result = await runTool(tool, args, {
        env: { AGENT_SIGNER_SVC_HSM_ENDPOINT: "http://127.0.0.1:9/enclave", LOG_LEVEL: "silent" },
        timeoutMs: 60_000,
      });
      expect(result.code).toBe(code);
      expect(result.stderr).toMatch(/^[a-z-]+: [^\n]*(\n {2}- )?AGENT_SIGNER_SVC_HSM_ENDPOINT/);
      expect(result.stderr).not.toContain("error:");
    },
  );

  // `--socket "$SOCK"` with the variable unset: the tools asked the enclave of
  // AGENT_SIGNER_SVC_HSM_ENDPOINT (or the local stack's) instead of the one the line meant.
  it.for<[string, string[], number]>([
    ["ops/enclave-policy.ts", ["show"], 2],
    ["ops/policy.ts", ["reseal"], 2],
    ["ops/recover.ts", ["transport-key"], 2],
    ["ops/restore-drill.ts", ["--pending", "--recovery-key", "k", "--recovery-enc-key", "k"], 2],
    ["ops/mint-capability.ts", ["--authority-key", "k", "--op", "restore_backup", "--env-id", "e"], 2],
    ["ops/canary.ts", [], 64],
  ])(
    "--socket '': %s %j exits %s (usage), the enclave of the environment not asked",
    async ([tool, args, code], { expect }) => {
      const result = await runTool(tool, [...args, "--socket", ""], {
        env: { AGENT_SIGNER_SVC_HSM_ENDPOINT: "unix:///nonexistent/enclave.sock", LOG_LEVEL: "silent" },
        timeoutMs: 60_000,
      });
      expect(result.code).toBe(code);
      expect(result.stderr).toMatch(/^[a-z-]+: --socket needs a path\n/);
    },
  );

  // Only funding answered --help; the others said "unknown command '--help'" (or option), exit 2.
  it.for([
    "ops/agents.ts",
    "ops/canary.ts",
    "ops/enclave-authority.ts",
    "ops/enclave-policy.ts",
    "ops/funding.ts",
    "ops/migrate.ts",
    "ops/mint-capability.ts",
    "ops/policy.ts",
    "ops/recover.ts",
    "ops/recovery-key.ts",
    "ops/recovery-reencrypt.ts",
    "ops/registration.ts",
    "ops/restore-drill.ts",
    "ops/webhooks.ts",
    "ops/x402-resources.ts",
  ])("%s --help: the usage on stdout, exit 0, and no cluster started", async (tool, { expect }) => {
    const clusterDir = path.join(dir, `pg-${cases++}`);
    const result = await runTool(tool, ["--help"], {
      env: {
        DATABASE_URL: undefined,
        EMBEDDED_PG_DIR: clusterDir,
        EMBEDDED_PG_PORT: String(await freePort()),
        LOG_LEVEL: "silent",
      },
      timeoutMs: 60_000,
    });
    expect({ code: result.code, stderr: result.stderr }).toEqual({ code: 0, stderr: "" });
    expect(result.stdout).toMatch(/^usage:/);
    expect(existsSync(clusterDir)).toBe(false);
  });
});
