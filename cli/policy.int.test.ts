import type { ChildProcess } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";
import {
  FeatureDisabled,
  PolicyDenied,
  PolicyHeld,
  PolicyLooseningRequiresOperator,
} from "../client/index.ts";
import { newAccount } from "../devnet/testing.ts";
import type { StackAgent } from "../testing/money-stack.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { useMoneyStack } from "../testing/stack.ts";

// The agent CLI's spending-policy commands and exit codes (docs/agents.md, "The agent's tools"), as
// an agent runs them: the `agent-wallet` bin in its own process against the real origin, enclave,
// devnet and Postgres. Scripts branch on the codes: 23 deny, 24 loosening, 25 held.

const SLOW = { timeout: 300_000 };
const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");

describe("agent-wallet policy commands and exit codes (real stack)", () => {
  const stack = useMoneyStack({}, { timeoutMs: 180_000 });
  let agent: StackAgent;
  let dir: string;
  const runs: ToolRun[] = [];
  const run = async (args: string[], stdin?: string): Promise<ToolRun> => {
    const result = await runTool(BIN, args, {
      env: { AGENT_BASE_URL: stack.origin.base, AGENT_TOKEN: agent.token },
      cleanEnv: true,
      timeoutMs: 90_000,
      ...(stdin === undefined ? {} : { stdin }),
    });
    runs.push(result);
    return result;
  };
  const json = (result: ToolRun): Record<string, unknown> => JSON.parse(result.stdout);

  beforeAll(async () => {
    agent = await stack.newAgent({ units: 20_000_000n });
    dir = await mkdtemp(path.join(tmpdir(), "agent-wallet-policy-"));
  }, 180_000);

  it("--help lists the policy commands and exit codes 23, 24 and 25", SLOW, async () => {
    const help = await run(["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("policy check --to ADDR --amount U");
    expect(help.stdout).toContain("policy set --file PATCH.json");
    expect(help.stdout).toContain(`${PolicyDenied.exitCode}  PolicyDenied: policy_denied`);
    expect(help.stdout).toContain(
      `${PolicyLooseningRequiresOperator.exitCode}  PolicyLooseningRequiresOperator: policy_loosening_requires_operator`,
    );
    expect(help.stdout).toContain(`${PolicyHeld.exitCode}  PolicyHeld: held`);
  });

  it(
    "shows, sets and checks the policy: allow 0, hold 25, deny 23; a loosening exits 24 and changes nothing",
    SLOW,
    async () => {
      const none = await run(["policy", "--json"]);
      expect(none.code).toBe(0);
      expect(json(none)).toEqual({ policy: null, version: null, node_frozen: false, budgets: [] });
      expect((await run(["policy"])).stdout).toMatch(/^no spending policy/);

      const patch = path.join(dir, "tighten.json");
      await writeFile(
        patch,
        JSON.stringify({ transfers: { per_tx_units: "5000000" }, approval_above_units: "2000000" }),
      );
      const set = await run(["policy", "set", "--file", patch, "--json"]);
      expect(set.code).toBe(0);
      expect(json(set)).toMatchObject({
        policy: { transfers: { per_tx_units: "5000000" }, approval_above_units: "2000000" },
        version: 1,
      });

      const to = newAccount().address;
      const allow = await run(["policy", "check", "--to", to, "--amount", "1000000", "--json"]);
      expect([allow.code, json(allow)]).toEqual([0, { decision: "allow", rule: null, remaining: null }]);
      const hold = await run(["policy", "check", "--to", to, "--amount", "3000000", "--json"]);
      expect([hold.code, json(hold)]).toEqual([
        25,
        { decision: "hold", rule: "approval_above_units", remaining: null },
      ]);
      const deny = await run(["policy", "check", "--to", to, "--amount", "6000000"]);
      expect(deny.code).toBe(23);
      expect(deny.stdout).toBe("deny by rule transfers.per_tx_units (remaining 5000000)\n");

      const loosen = path.join(dir, "loosen.json");
      await writeFile(loosen, JSON.stringify({ approval_above_units: null }));
      const refused = await run(["policy", "set", "--file", loosen, "--json"]);
      expect(refused.code).toBe(24);
      expect(json(refused)).toMatchObject({
        error: {
          name: "PolicyLooseningRequiresOperator",
          code: "policy_loosening_requires_operator",
          status: 403,
          exit_code: 24,
        },
      });
      expect(json(await run(["policy", "--json"]))).toMatchObject({ version: 1 });
    },
  );

  it(
    "a transfer held prints the action and exits 25; one the policy refuses exits 23 naming rule and remaining",
    SLOW,
    async () => {
      const to = newAccount().address;
      const held = await run([
        "transfer",
        "--to",
        to,
        "--amount",
        "3000000",
        "--key",
        "cli-held-1",
        "--json",
      ]);
      expect(held.code).toBe(25);
      expect(json(held)).toMatchObject({
        status: "held",
        rule: "approval_above_units",
        expires_at: expect.any(String),
        tx_hash: null,
        idempotency_key: "cli-held-1",
      });
      const human = await run(["transfer", "--to", to, "--amount", "3000000", "--key", "cli-held-1"]);
      expect(human.code).toBe(25);
      expect(human.stdout).toMatch(/transfer held\n[\s\S]*held by rule approval_above_units until /);
      const actionId = json(held).action_id as string;
      expect((await run(["action", actionId])).code).toBe(25);

      const denied = await run(["transfer", "--to", to, "--amount", "6000000", "--json"]);
      expect(denied.code).toBe(23);
      expect(json(denied)).toMatchObject({
        error: {
          name: "PolicyDenied",
          code: "policy_denied",
          rule: "transfers.per_tx_units",
          remaining: "5000000",
          status: 403,
          exit_code: 23,
        },
      });
      const deniedHuman = await run(["transfer", "--to", to, "--amount", "6000000"]);
      expect(deniedHuman.code).toBe(23);
      expect(deniedHuman.stderr).toContain("(rule transfers.per_tx_units, remaining 5000000)");
    },
  );

  // Mutation: without the line (cli/run.ts, waitForMoney), a held transfer's --wait prints nothing
  // until the hold ends (a day by default): the agent that stops it has no key, and running the same
  // command again makes a second held transfer, which an operator may approve as well.
  it(
    "transfer --wait while held says on stderr what it waits for, with the key; stopped and run again with it, the same held action",
    SLOW,
    async () => {
      const to = newAccount().address;
      let child: ChildProcess | undefined;
      let stderr = "";
      const waited = await runTool(BIN, ["transfer", "--to", to, "--amount", "3000000", "--wait", "--json"], {
        env: { AGENT_BASE_URL: stack.origin.base, AGENT_TOKEN: agent.token },
        cleanEnv: true,
        timeoutMs: 30_000,
        onSpawn: (spawned) => {
          child = spawned;
        },
        onStderr: (text) => {
          stderr += text;
          // The agent (or its harness) stops the command once it says what it waits for.
          if (stderr.includes("\n")) child?.kill("SIGTERM");
        },
      });
      runs.push(waited);
      expect(waited.code, "the command was stopped by the test, not ended by itself").toBe(-1);
      expect(waited.stdout).toBe("");
      const line =
        /^agent-wallet: action (\S+) is held by rule approval_above_units until \S+ for an operator's decision; still waiting \(it is safe to stop and run the same command with --key (transfer-\S+): never a second payment\)\n/.exec(
          stderr,
        );
      expect(line, stderr).not.toBeNull();
      const [, actionId, key] = line!;
      const again = await run(["transfer", "--to", to, "--amount", "3000000", "--key", key!, "--json"]);
      expect(again.code).toBe(25);
      expect(json(again)).toMatchObject({ action_id: actionId, status: "held", idempotency_key: key });
    },
  );

  it("policy check --payment-required - sends the quote read from stdin", SLOW, async () => {
    const quote = {
      x402Version: 2,
      resource: { url: "https://seller.example/thing" },
      accepts: [
        {
          scheme: "exact",
          network: "eip155:77",
          asset: "0x2d00000000000000000000000000000000000006",
          amount: "10000",
          payTo: newAccount().address,
          maxTimeoutSeconds: 60,
        },
      ],
    };
    // This stack has no x402 payer side: the gateway got the quote and answers feature_disabled (a
    // quote not sent, or not read, would be a usage or validation error: exit 2 or 6).
    const checked = await run(
      ["policy", "check", "--payment-required", "-", "--json"],
      JSON.stringify(quote),
    );
    expect(checked.code, checked.stdout).toBe(FeatureDisabled.exitCode);
    expect(json(checked)).toMatchObject({ error: { code: "feature_disabled" } });
    const garbled = await run(["policy", "check", "--payment-required", "-", "--json"], "{not json");
    expect(garbled.code).toBe(6);
  });

  it(
    "policy freeze: the next transfer exits 23 with rule frozen; the token is in no output",
    SLOW,
    async () => {
      const frozen = await run(["policy", "freeze", "--json"]);
      expect(frozen.code).toBe(0);
      expect(json(frozen)).toMatchObject({ policy: { frozen: true } });
      const refused = await run(["transfer", "--to", newAccount().address, "--amount", "1000", "--json"]);
      expect(refused.code).toBe(23);
      expect(json(refused)).toMatchObject({ error: { code: "policy_denied", rule: "frozen" } });
      const [, secret] = agent.token.split(/_(?=[0-9a-f]{64}$)/);
      for (const result of runs) {
        expect(result.stdout + result.stderr).not.toContain(secret);
      }
    },
  );
});
