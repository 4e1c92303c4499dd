import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { sql } from "drizzle-orm";
import pino from "pino";
import type { Address, Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  ActionFailed,
  AgentAuthFailed,
  CapabilityRequired,
  InsufficientFunds,
  LimitExceeded,
  PaymentOutcomeUnknown,
  RegistrationUnavailable,
  SignerUnavailable,
  ValidationFailed,
} from "../client/index.ts";
import { newAccount, publicClientFor } from "../devnet/testing.ts";
import { queryRows } from "../origin/db/client.ts";
import { makeBatch } from "../origin/keypool/refill.ts";
import { updateRegistrationPolicy } from "../origin/registration/policy-repository.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import { sleep } from "../shared/sleep.ts";
import { answerCutAfterHeaders } from "../testing/cut-body.ts";
import { type EdgeHandle, startTestEdge } from "../testing/edge.ts";
import type { StackAgent } from "../testing/money-stack.ts";
import { deployRevertingContract } from "../testing/reverting-contract.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { recordSecret } from "../testing/secret-sink.ts";
import { useMoneyStack } from "../testing/stack.ts";
import { authorizationUsedCount } from "../testing/x402-settlements.ts";

// The agent CLI (docs/agents.md) end to end, as an agent runs it: the `agent-wallet` bin in its own
// process, through the edge (Miniflare) in front of the real origin, enclave, devnet and Postgres.

/** Adjacent concurrent blocks run at once; each block's tests run as it marks them. */
const BESIDE = { concurrent: true } as const;

/** Each run is a fresh Node process (the bundle the suite's setup built): a second or more on a busy machine. */
const SLOW = { timeout: 300_000 };

/** The demo's price with x402 on (10000 units = 0.01 USDC), paid to a fresh address. */
const X402_AMOUNT = 10_000n;
const X402_PAY_TO = newAccount().address.toLowerCase() as Address;

const BIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");

function agentWallet(args: string[], env: Record<string, string>): Promise<ToolRun> {
  return runTool(BIN, args, { env, cleanEnv: true, timeoutMs: 90_000 });
}

/** The demo's answer to one request through startDemoProxy, its headers as the proxy passes them on. */
type DemoAnswer = { paid: boolean; status: number; headers: Record<string, string>; body: string };

/**
 * A real proxy in front of the demo at `demoUrl`, reached at its `url`: each request goes on to the
 * demo, and the demo's answer back to the client, unless `fault` answers the client itself (a fault
 * made on purpose), which it says by returning true.
 */
async function startDemoProxy(
  demoUrl: string,
  fault: (answer: DemoAnswer, response: ServerResponse) => boolean,
): Promise<{ url: string; close(): Promise<void> }> {
  const proxy = createServer(async (request, response) => {
    const headers = new Headers();
    for (const [name, value] of Object.entries(request.headers)) {
      if (typeof value === "string" && name !== "host") headers.set(name, value);
    }
    const upstream = await fetch(demoUrl, { method: request.method, headers });
    const body = await upstream.text();
    const answer: Record<string, string> = {};
    upstream.headers.forEach((value, name) => {
      if (name !== "content-length" && name !== "transfer-encoding") answer[name] = value;
    });
    const paid = headers.has("payment-signature");
    if (fault({ paid, status: upstream.status, headers: answer, body }, response)) return;
    response.writeHead(upstream.status, answer).end(body);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/resource`,
    close: () => new Promise((resolve) => proxy.close(() => resolve())),
  };
}

describe("agent-wallet CLI (through the edge, real stack)", () => {
  // The tests that stop the enclave wait for the origin to reconnect once it is back: its signer
  // client retries every 0.5 s at most here, not every 5 s (what they check is that the same key
  // then moves the money once, however soon that is).
  const stack = useMoneyStack(
    {
      x402: { amountUnits: X402_AMOUNT, payTo: X402_PAY_TO },
      signerTimings: { backoff: { initialMs: 50, maxMs: 500 } },
    },
    { timeoutMs: 180_000 },
  );
  let edge: EdgeHandle;
  let agent: StackAgent;
  let rotating: StackAgent;
  let watcher: StackAgent;
  let x402Watcher: StackAgent;
  let proxiedPayer: StackAgent;
  let cutPayer: StackAgent;
  let stalledPayer: StackAgent;
  let optionsPayer: StackAgent;
  let base: string;
  const runs: ToolRun[] = [];
  const run = async (args: string[], token: string | undefined = agent.token): Promise<ToolRun> => {
    const result = await agentWallet(args, {
      AGENT_BASE_URL: base,
      ...(token ? { AGENT_TOKEN: token } : {}),
    });
    runs.push(result);
    return result;
  };

  beforeAll(async () => {
    const edgeSecret = randomBytes(32).toString("hex");
    const origin = await stack.startOrigin({
      AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
      AGENT_REGISTRATION_ALLOW_LOOPBACK: "true",
      AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
      AGENT_EDGE_SHARED_SECRET: edgeSecret,
    });
    edge = await startTestEdge({ originUrl: origin.url, edgeSharedSecret: edgeSecret, onLine: () => {} });
    base = `${edge.url}/77`;
    agent = await stack.newAgent({ units: 3_000_000n });
    // Made before the register test leaves a public batch's free key behind.
    rotating = await stack.newAgent({ units: 2_000n });
    watcher = await stack.newAgent({ units: 1_000_000n });
    x402Watcher = await stack.newAgent({ units: 1_000_000n });
    proxiedPayer = await stack.newAgent({ units: 1_000_000n });
    cutPayer = await stack.newAgent({ units: 1_000_000n });
    stalledPayer = await stack.newAgent({ units: 1_000_000n });
    optionsPayer = await stack.newAgent({ units: 1_000_000n });
  }, 180_000);
  afterAll(async () => {
    await edge?.stop();
  });

  it(
    "prints the help with the exit codes, and refuses a missing token or a token argument (2)",
    SLOW,
    async () => {
      const help = await run(["--help"]);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain(`${AgentAuthFailed.exitCode}  AgentAuthFailed`);
      expect(help.stdout).toContain(`${LimitExceeded.exitCode}  LimitExceeded`);
      expect(help.stdout).toContain(
        `${ActionFailed.exitCode}  ActionFailed: reverted, broadcast_refused, abandoned`,
      );
      expect(help.stdout).toMatch(/Exit 14 or 19:\s+nothing was signed/);
      // The README's `agent-wallet faucet --wait`: the help names the option the command takes.
      expect(help.stdout).toContain("faucet [--key K] [--wait]");
      expect(help.stdout).toContain(
        `${ValidationFailed.exitCode}  ValidationFailed: validation_failed, payload_too_large, headers_too_large`,
      );
      const noToken = await run(["balance"], "");
      expect(noToken.code).toBe(2);
      expect(noToken.stderr).toMatch(/AGENT_TOKEN is not set/);
      const asArgument = await run(["balance", "--token", agent.token]);
      expect(asArgument.code).toBe(2);
      expect(asArgument.stderr).not.toContain(agent.token);
    },
  );

  it("network, balance, faucet, transfer, action: output and exit 0", SLOW, async () => {
    const network = await run(["network"]);
    expect(network.code).toBe(0);
    expect(network.stdout).toContain(`agent ${agent.agentId}`);
    expect(network.stdout).toContain("chain 77 (eip155:77)");

    const balance = await run(["balance", "--json"]);
    expect(balance.code).toBe(0);
    expect(JSON.parse(balance.stdout)).toMatchObject({
      balance: "3000000",
      address: agent.wallet.toLowerCase(),
    });
    expect((await run(["balance"])).stdout).toMatch(
      /^3 USDC \(3000000 units\) in 0x[0-9a-f]{40} at block \d+\n$/,
    );

    const faucet = await run(["faucet", "--json", "--wait"]);
    expect(faucet.code).toBe(0);
    expect(JSON.parse(faucet.stdout)).toMatchObject({ kind: "faucet", status: "confirmed" });

    const to = newAccount().address;
    const transfer = await run([
      "transfer",
      "--to",
      to,
      "--amount",
      "700000",
      "--key",
      "cli-transfer-1",
      "--json",
    ]);
    expect(transfer.code).toBe(0);
    const action = JSON.parse(transfer.stdout) as { action_id: string; idempotency_key: string };
    expect(action.idempotency_key).toBe("cli-transfer-1");
    const waited = await run(["action", action.action_id, "--wait"]);
    expect(waited.code).toBe(0);
    expect(waited.stdout).toContain(`action ${action.action_id}: transfer confirmed`);
    expect(waited.stdout).toContain(`amount 0.7 USDC to ${to.toLowerCase()}`);
    expect(await publicClientFor(stack.devnet.url).getBalance({ address: to })).toBe(700_000n * WEI_PER_UNIT);
    // The same key again: the same action, nothing moves twice.
    const again = await run([
      "transfer",
      "--to",
      to,
      "--amount",
      "700000",
      "--key",
      "cli-transfer-1",
      "--json",
    ]);
    expect(JSON.parse(again.stdout).action_id).toBe(action.action_id);
  });

  it("exits with the error class's code, JSON or human", SLOW, async () => {
    const bad = await run(["balance"], `${agent.token.slice(0, -4)}0000`);
    expect(bad.code).toBe(AgentAuthFailed.exitCode);
    expect(bad.stderr).toMatch(/AgentAuthFailed \[agent_auth_failed\]/);

    const over = await run(["transfer", "--to", newAccount().address, "--amount", "10000001", "--json"]);
    expect(over.code).toBe(LimitExceeded.exitCode);
    // The service's whole error object, with the class, status, key and exit code.
    expect(JSON.parse(over.stdout)).toEqual({
      error: {
        name: "LimitExceeded",
        code: "limit_exceeded",
        message: expect.stringMatching(/per-transaction limit/),
        limit: "per_transaction",
        limit_units: "10000000",
        remaining_units: "10000000",
        action_id: expect.any(String),
        request_id: expect.stringMatching(/^req_/),
        status: 403,
        idempotency_key: expect.stringMatching(/^transfer-/),
        exit_code: LimitExceeded.exitCode,
      },
    });

    // The figures of a refusal for funds, in USDC beside the service's units. Mutation: dropping
    // the InsufficientFunds suffix in cli/run.ts fails this.
    const poor = await stack.newAgent({ units: 1_000n });
    const broke = await run(["transfer", "--to", newAccount().address, "--amount", "1000"], poor.token);
    expect(broke.code).toBe(InsufficientFunds.exitCode);
    expect(broke.stderr).toMatch(
      /InsufficientFunds \[insufficient_funds\]: .*needs (\d+) units and has 1000 available.*\(needs 0\.00\d+ USDC, 0\.001 USDC available\)\n/,
    );

    const reader = await stack.newAgent({ capabilities: ["read"] });
    expect((await run(["faucet"], reader.token)).code).toBe(CapabilityRequired.exitCode);
    expect((await run(["transfer", "--to", "0x1"])).code).toBe(2);
  });

  it("prints a usage error under --json as one JSON document on stdout, exit 2", SLOW, async () => {
    for (const args of [
      ["transfer", "--to", "0x1", "--json"],
      ["balance", "--frobnicate", "--json"],
      ["--json"],
    ]) {
      const usage = await run(args);
      expect({ args, code: usage.code }).toEqual({ args, code: 2 });
      expect(JSON.parse(usage.stdout)).toEqual({
        error: { name: "UsageError", code: "usage", message: expect.any(String), exit_code: 2 },
      });
    }
  });

  it(
    "signer down, then unable to sign: exit 14 naming the key; the same command with --key then moves the money once",
    SLOW,
    async () => {
      const payer = await stack.newAgent({ units: 1_000_000n });
      const to = newAccount().address;
      const transfer = (...extra: string[]) =>
        run(["transfer", "--to", to, "--amount", "1000", "--key", "cli-down-1", ...extra], payer.token);
      await stack.enclave.stop();
      try {
        const down = await transfer("--json");
        expect(down.code).toBe(SignerUnavailable.exitCode);
        expect(JSON.parse(down.stdout)).toMatchObject({
          error: {
            name: "SignerUnavailable",
            code: "agent_signer_unavailable",
            message: expect.stringMatching(/nothing was signed: retry with the same idempotency_key/),
            idempotency_key: "cli-down-1",
            exit_code: SignerUnavailable.exitCode,
          },
        });
        // Another version of the enclave on the socket: it answers, and cannot sign for us.
        await stack.enclave.start({ profile: "bridge_operator" });
        const cannot = await transfer();
        expect(cannot.code).toBe(SignerUnavailable.exitCode);
        expect(cannot.stderr).toContain("run the same command with --key cli-down-1");
      } finally {
        await stack.enclave.start();
      }
      // The origin's enclave client reconnects after its backoff (at most 5 s).
      let sent = await transfer("--wait", "--json");
      for (let i = 0; i < 5 && sent.code === SignerUnavailable.exitCode; i++)
        sent = await transfer("--wait", "--json");
      expect(sent.code, sent.stdout).toBe(0);
      expect(JSON.parse(sent.stdout)).toMatchObject({ status: "confirmed", idempotency_key: "cli-down-1" });
      const chain = publicClientFor(stack.devnet.url);
      expect(await chain.getBalance({ address: to })).toBe(1_000n * WEI_PER_UNIT);
      expect(await chain.getTransactionCount({ address: payer.wallet })).toBe(1);
    },
  );

  it(
    "an enclave that does not answer: one line on stderr says what the command waits for while it waits; stdout and the exit code stay the command's",
    SLOW,
    async () => {
      const payer = await stack.newAgent({ units: 1_000_000n });
      const to = newAccount().address.toLowerCase();
      let stderrSoFar = "";
      let exited = false;
      // A real hang: the enclave process paused (SIGSTOP) with the origin's request in its socket.
      process.kill(stack.enclave.pid()!, "SIGSTOP");
      let transfer: Promise<ToolRun>;
      try {
        transfer = runTool(BIN, ["transfer", "--to", to, "--amount", "1000", "--key", "cli-hung-1"], {
          env: { AGENT_BASE_URL: base, AGENT_TOKEN: payer.token },
          cleanEnv: true,
          timeoutMs: 90_000,
          onStderr: (text) => {
            stderrSoFar += text;
          },
        }).finally(() => {
          exited = true;
        });
        // Mutation: the CLI without its waiting notice (cli/run.ts, withWaitingNotice) fails this:
        // nothing is printed until the client's retries give up, some 30 s later.
        const deadline = Date.now() + 20_000;
        while (!stderrSoFar.includes("\n") && !exited && Date.now() < deadline) await sleep(100);
        expect(exited).toBe(false);
        expect(stderrSoFar).toBe(
          `agent-wallet: no answer yet from POST ${base}/agent/v1/transfers after 2 s; still waiting (a money request may wait for the service's signer; it is safe to stop and run the same command with --key cli-hung-1: never a second payment)\n`,
        );
      } finally {
        process.kill(stack.enclave.pid()!, "SIGCONT");
      }
      // Answered once the enclave runs again: what the command prints without the wait.
      const done = await transfer;
      expect(done.code).toBe(0);
      expect(done.stdout).toMatch(
        new RegExp(
          `^action [0-9a-f-]{36}: transfer (signed|confirmed)\namount 0.001 USDC to ${to}\ntx 0x[0-9a-f]{64}\nidempotency key cli-hung-1\n$`,
        ),
      );
      expect(done.stderr).toBe(stderrSoFar);
      runs.push(done);
    },
  );

  // Mutation: without the CLI's stop line (cli/run.ts stoppedAdvice, cli/main.ts onStopped), a
  // transfer stopped before its waiting notice is due prints nothing: its generated key is lost, and
  // the same command again is a second transfer.
  it(
    "a transfer stopped with Ctrl-C while its request is out says its key on stderr; the same command with it moves the money once",
    SLOW,
    async ({ expect }) => {
      const payer = await stack.newAgent({ units: 1_000_000n });
      const to = newAccount().address;
      const args = ["transfer", "--to", to, "--amount", "1000"];
      const requested = async () =>
        (
          await queryRows<{ n: number }>(
            stack.db.handle.db,
            sql`select count(*)::int as n from agent_actions where agent_id = ${payer.agentId}`,
          )
        )[0]!.n;
      let child: ChildProcess | undefined;
      // A real hang: the enclave process paused (SIGSTOP), so the request waits on the signer.
      process.kill(stack.enclave.pid()!, "SIGSTOP");
      let stopped: ToolRun;
      try {
        const running = runTool(BIN, args, {
          env: { AGENT_BASE_URL: base, AGENT_TOKEN: payer.token },
          cleanEnv: true,
          timeoutMs: 90_000,
          onSpawn: (spawned) => {
            child = spawned;
          },
        });
        // Stopped as soon as the service has the request, before the 2 s waiting notice.
        await expect.poll(requested, { timeout: 20_000, interval: 20 }).toBe(1);
        child!.kill("SIGINT");
        stopped = await running;
      } finally {
        process.kill(stack.enclave.pid()!, "SIGCONT");
      }
      runs.push(stopped);
      expect(stopped.code, "ended by the signal, as any program").toBe(-1);
      expect(stopped.stdout).toBe("");
      const line =
        /^agent-wallet: stopped; the request may have reached the service: run the same command with --key (transfer-\S+) to learn what it came to \(never a second payment\)\n$/m.exec(
          stopped.stderr,
        );
      expect(line, stopped.stderr).not.toBeNull();
      const again = await run([...args, "--key", line![1]!, "--wait", "--json"], payer.token);
      expect(again.code, again.stdout).toBe(0);
      expect(JSON.parse(again.stdout)).toMatchObject({ status: "confirmed", idempotency_key: line![1] });
      expect(await requested()).toBe(1);
      const chain = publicClientFor(stack.devnet.url);
      expect(await chain.getBalance({ address: to })).toBe(1_000n * WEI_PER_UNIT);
      expect(await chain.getTransactionCount({ address: payer.wallet })).toBe(1);
    },
  );

  it(
    "exits with the class of a terminal failure, also on a repeat of the key: over the limit (10), reverted (20)",
    SLOW,
    async () => {
      const payer = await stack.newAgent({ units: 1_000_000n });
      const over = ["transfer", "--to", newAccount().address, "--amount", "10000001", "--key", "cli-over-1"];
      const first = await run([...over, "--json"]);
      const repeat = await run([...over, "--json"]);
      for (const result of [first, repeat]) expect(result.code).toBe(LimitExceeded.exitCode);
      const refused = JSON.parse(first.stdout).error;
      expect(JSON.parse(repeat.stdout).error).toMatchObject({
        code: "limit_exceeded",
        status: 403,
        action_id: refused.action_id,
        idempotency_key: "cli-over-1",
      });

      // Mined and reverted: a transfer to a contract whose code is INVALID.
      const contract = await deployRevertingContract(stack.devnet.url);
      const revert = ["transfer", "--to", contract, "--amount", "1000", "--key", "cli-revert-1"];
      const waited = await run([...revert, "--wait", "--json"], payer.token);
      expect(waited.code).toBe(ActionFailed.exitCode);
      const failed = JSON.parse(waited.stdout).error;
      expect(failed).toMatchObject({
        name: "ActionFailed",
        code: "reverted",
        action_status: "reverted",
        idempotency_key: "cli-revert-1",
        exit_code: ActionFailed.exitCode,
      });
      const again = await run([...revert, "--json"], payer.token);
      expect(again.code).toBe(ActionFailed.exitCode);
      expect(JSON.parse(again.stdout).error).toMatchObject({
        code: "reverted",
        status: 422,
        action_id: failed.action_id,
      });
      const read = await run(["action", failed.action_id], payer.token);
      expect(read.code).toBe(ActionFailed.exitCode);
      expect(read.stderr).toMatch(/ActionFailed \[reverted\]/);
    },
  );

  it(
    "register: refused while paused (exit 15), then a new token that reads its empty wallet",
    SLOW,
    async () => {
      const paused = await run(["register", "--json"], undefined);
      expect(paused.code).toBe(RegistrationUnavailable.exitCode);
      expect(JSON.parse(paused.stdout)).toMatchObject({ error: { code: "registration_unavailable" } });

      // Free keys for public issuance, and the policy opened (it starts paused).
      const batch = await makeBatch(
        {
          db: stack.db.handle.db,
          signer: stack.signer,
          authorize: stack.authorities.admin,
          backupDir: stack.backupDir,
          logger: pino({ level: "silent" }),
        },
        2,
      );
      expect(batch.ok).toBe(true);
      await updateRegistrationPolicy(stack.db.handle.db, {
        changes: { paused: false, keyReserve: 0 },
        reason: "cli test",
      });

      const registered = await run(["register", "--json"], undefined);
      expect(registered.code).toBe(0);
      const identity = JSON.parse(registered.stdout) as {
        token: string;
        capabilities: string[];
        chain_id: number;
      };
      expect(identity).toMatchObject({ capabilities: ["read", "transfer"], chain_id: 77 });
      const balance = await run(["balance", "--json"], identity.token);
      expect(JSON.parse(balance.stdout)).toMatchObject({ balance: "0" });
    },
  );

  it(
    "pay URL: pays the demo's 402 once through the gateway, prints the transaction, exit 0",
    SLOW,
    async () => {
      const chain = publicClientFor(stack.devnet.url);
      const before = await chain.getBalance({ address: agent.wallet });
      const paid = await run(["pay", `${base}/x402/demo`]);
      expect(paid.code).toBe(0);
      const printed = /^200: paid in transaction (0x[0-9a-f]{64}) on eip155:77\n/.exec(paid.stdout);
      expect(printed, paid.stdout).not.toBeNull();
      const receipt = await chain.getTransactionReceipt({ hash: printed![1] as Hex });
      expect(receipt.status).toBe("success");
      // Paid once, exactly the price: the settler paid the gas.
      expect(before - (await chain.getBalance({ address: agent.wallet }))).toBe(X402_AMOUNT * WEI_PER_UNIT);
      expect(await authorizationUsedCount(stack.devnet.url, agent.wallet)).toBe(1);
      expect(await chain.getBalance({ address: X402_PAY_TO })).toBe(X402_AMOUNT * WEI_PER_UNIT);

      const json = await run(["pay", `${base}/x402/demo`, "--json"]);
      expect(json.code).toBe(0);
      expect(JSON.parse(json.stdout)).toMatchObject({
        status: 200,
        settlement: {
          success: true,
          network: "eip155:77",
          transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
        },
      });
      for (const output of [paid.stdout, paid.stderr, json.stdout, json.stderr])
        expect(output).not.toContain(agent.token);
    },
  );

  // Mutation: without the CLI's check of each command's options (cli/run.ts, optionsOf), `pay URL
  // --amount 1` ignores --amount and pays the quote's 10000 units, and `faucet --amount` its payout.
  it(
    "an option the command does not take (pay --amount, faucet --amount) is a usage error (2): nothing paid",
    SLOW,
    async () => {
      const payer = optionsPayer;
      const chain = publicClientFor(stack.devnet.url);
      const before = await chain.getBalance({ address: payer.wallet });
      for (const args of [
        ["pay", `${base}/x402/demo`, "--amount", "1"],
        ["faucet", "--amount", "1"],
      ]) {
        const refused = await run([...args, "--json"], payer.token);
        expect({ args, code: refused.code }).toEqual({ args, code: 2 });
        expect(JSON.parse(refused.stdout)).toEqual({
          error: {
            name: "UsageError",
            code: "usage",
            message: `${args[0]} does not take --amount`,
            exit_code: 2,
          },
        });
      }
      expect(await authorizationUsedCount(stack.devnet.url, payer.wallet)).toBe(0);
      expect(await chain.getBalance({ address: payer.wallet })).toBe(before);
    },
  );

  // Mutation: without the check in cli/run.ts's pay, the demo is asked a GET carrying the data,
  // which it ignores, and paid: exit 0, one authorization used.
  it(
    "pay URL --data without a --method that carries a body is ValidationFailed (6): nothing paid",
    SLOW,
    async () => {
      for (const method of [[], ["--method", "get"]]) {
        const refused = await run(
          ["pay", `${base}/x402/demo`, "--data", '{"q":1}', ...method, "--json"],
          optionsPayer.token,
        );
        expect(refused.code, refused.stdout).toBe(ValidationFailed.exitCode);
        expect(JSON.parse(refused.stdout)).toMatchObject({
          error: {
            code: "validation_failed",
            message: expect.stringMatching(/^--data needs --method with a body/),
          },
        });
      }
      expect(await authorizationUsedCount(stack.devnet.url, optionsPayer.wallet)).toBe(0);
    },
  );

  /**
   * `watch` with `args` as `token` until it printed `lines` lines, then Ctrl-C; `during` runs
   * meanwhile.
   */
  const watch = async (
    args: string[],
    lines: number,
    during?: () => Promise<void>,
    token: string = watcher.token,
  ): Promise<ToolRun> => {
    let child: ChildProcess | undefined;
    let printed = "";
    const watching = runTool(BIN, ["watch", ...args], {
      env: { AGENT_BASE_URL: base, AGENT_TOKEN: token },
      cleanEnv: true,
      timeoutMs: 120_000,
      onSpawn: (spawned) => {
        child = spawned;
      },
      onStdout: (text) => {
        printed += text;
      },
    });
    await during?.();
    const deadline = Date.now() + 30_000;
    while (printed.split("\n").length <= lines && Date.now() < deadline) await sleep(100);
    await sleep(500);
    // Mutation: a watch that leaves Ctrl-C to Node's default dies of the signal (code -1).
    child!.kill("SIGINT");
    const done = await watching;
    runs.push(done);
    return done;
  };

  // The paid answer that stalls until --timeout (5 s) runs beside the tests after it (vitest runs
  // adjacent concurrent blocks at once), each block's tests in turn: each has its own agent or payer
  // and its own proxy, and all of them after the test that counts the demo payee's balance. None
  // stops or pauses the enclave, nor changes a setting (docs/performance.md, "The test suite").
  describe("a paid answer that stalls", BESIDE, () => {
    it.sequential(
      "pay URL: a paid answer whose body stalls after its headers exits 17 past --timeout, naming the transaction that settled it; the same command with the key gets the answer, paying nothing more",
      SLOW,
      async () => {
        // Mutation: with node:http's fetch failing the whole request on the timeout, headers and all,
        // the run exits 17 payment_outcome_unknown, saying the payment may have settled, with no
        // transaction.
        const payer = stalledPayer;
        // A real proxy in front of the demo that passes on the first paid answer's status and headers
        // (its PAYMENT-RESPONSE included) and then sends nothing more, holding the connection open
        // (a fault made on purpose: a resource or proxy that hangs in the middle of its answer).
        let stall = true;
        const proxy = await startDemoProxy(`${base}/x402/demo`, (answer, response) => {
          if (!stall || !answer.paid || answer.status !== 200) return false;
          stall = false;
          response.writeHead(answer.status, {
            ...answer.headers,
            "content-length": String(answer.body.length + 1_000),
          });
          response.write(answer.body.slice(0, 8));
          return true;
        });
        try {
          const { url } = proxy;
          const stalled = await run(["pay", url, "--json", "--timeout", "5"], payer.token);
          expect(stalled.code, stalled.stdout + stalled.stderr).toBe(PaymentOutcomeUnknown.exitCode);
          const { error } = JSON.parse(stalled.stdout) as { error: Record<string, unknown> };
          expect(error).toMatchObject({
            name: "PaymentOutcomeUnknown",
            code: "paid_answer_lost",
            status: 200,
            transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
            settlement: { success: true, network: "eip155:77" },
          });
          const transaction = error.transaction as Hex;
          expect(error.message).toMatch(/did not come whole in time \(no whole answer within 5 s;/);
          expect(await authorizationUsedCount(stack.devnet.url, payer.wallet)).toBe(1);

          const again = await run(["pay", url, "--key", String(error.idempotency_key)], payer.token);
          expect(again.code, again.stderr).toBe(0);
          expect(again.stdout).toMatch(new RegExp(`^200: paid in transaction ${transaction} on eip155:77\n`));
          expect(await authorizationUsedCount(stack.devnet.url, payer.wallet)).toBe(1);
        } finally {
          await proxy.close();
        }
      },
    );
  });

  describe("beside the stalled answer", BESIDE, () => {
    it.sequential(
      "pay URL: a paid request answered 502 by a proxy exits 17 with the key; the same command with it pays nothing more",
      SLOW,
      async () => {
        // Mutation: without the client's PaymentOutcomeUnknown for a paid 502, the first run exits 0,
        // printing the proxy's 502 as the answer.
        const payer = proxiedPayer;
        // A real proxy in front of the demo that loses the upstream answer to the first paid request,
        // after the demo settled it, and answers 502 itself (a fault made on purpose).
        let lose = true;
        const proxy = await startDemoProxy(`${base}/x402/demo`, (answer, response) => {
          if (!lose || !answer.paid) return false;
          lose = false;
          response.writeHead(502, { "content-type": "text/plain" }).end("bad gateway");
          return true;
        });
        try {
          const { url } = proxy;
          const lost = await run(["pay", url, "--json"], payer.token);
          expect(lost.code).toBe(PaymentOutcomeUnknown.exitCode);
          const { error } = JSON.parse(lost.stdout) as { error: Record<string, unknown> };
          expect(error).toMatchObject({ name: "PaymentOutcomeUnknown", status: 502, exit_code: 17 });
          expect(error.idempotency_key).toMatch(/^x402-[0-9a-f]{64}$/);
          expect(await authorizationUsedCount(stack.devnet.url, payer.wallet)).toBe(1);

          const again = await run(["pay", url, "--key", String(error.idempotency_key)], payer.token);
          expect(again.code, again.stderr).toBe(0);
          expect(again.stdout).toMatch(/^200: paid in transaction 0x[0-9a-f]{64} on eip155:77\n/);
          expect(await authorizationUsedCount(stack.devnet.url, payer.wallet)).toBe(1);
        } finally {
          await proxy.close();
        }
      },
    );

    it.sequential(
      "pay URL: a paid answer whose body is cut off after its headers exits 17 naming the transaction that settled it; the same command with the key gets the answer, paying nothing more",
      SLOW,
      async () => {
        // Mutation: without paidAnswerText the first run crashes with the body's raw error (fetch's
        // "terminated"), or, over the CLI's node:http fetch dropping the headers of a cut answer, exits
        // 17 saying the payment may have settled, with no transaction.
        const payer = cutPayer;
        const chain = publicClientFor(stack.devnet.url);
        // A real proxy in front of the demo that passes on the first paid answer's status and headers
        // (its PAYMENT-RESPONSE included) and cuts the connection in its body (a fault made on purpose).
        let cut = true;
        const proxy = await startDemoProxy(`${base}/x402/demo`, (answer, response) => {
          if (!cut || !answer.paid || answer.status !== 200) return false;
          cut = false;
          answerCutAfterHeaders(response, answer.status, answer.headers, answer.body.slice(0, 8));
          return true;
        });
        try {
          const { url } = proxy;
          const lost = await run(["pay", url, "--json"], payer.token);
          expect(lost.code, lost.stdout + lost.stderr).toBe(PaymentOutcomeUnknown.exitCode);
          const { error } = JSON.parse(lost.stdout) as { error: Record<string, unknown> };
          expect(error).toMatchObject({
            name: "PaymentOutcomeUnknown",
            code: "paid_answer_lost",
            status: 200,
            exit_code: 17,
            transaction: expect.stringMatching(/^0x[0-9a-f]{64}$/),
            settlement: { success: true, network: "eip155:77" },
          });
          const transaction = error.transaction as Hex;
          expect(error.message).toContain(`the payment settled in transaction ${transaction} on eip155:77`);
          expect(error.message).toMatch(/cut off after its headers .*repeat with the same idempotency key/);
          expect(error.idempotency_key).toMatch(/^x402-[0-9a-f]{64}$/);
          // The transaction named is the one that paid, and the only one.
          expect((await chain.getTransactionReceipt({ hash: transaction })).status).toBe("success");
          expect(await authorizationUsedCount(stack.devnet.url, payer.wallet)).toBe(1);

          // The demo answers a payment by its id: the same payment presented again gets the answer.
          const again = await run(["pay", url, "--key", String(error.idempotency_key)], payer.token);
          expect(again.code, again.stderr).toBe(0);
          expect(again.stdout).toMatch(new RegExp(`^200: paid in transaction ${transaction} on eip155:77\n`));
          expect(await authorizationUsedCount(stack.devnet.url, payer.wallet)).toBe(1);
          for (const output of [lost.stdout, lost.stderr, again.stdout, again.stderr])
            expect(output).not.toContain(payer.token);
        } finally {
          await proxy.close();
        }
      },
    );

    it.sequential(
      "rotate-token: prints the new token once; the old one then exits 3, the new one reads the same wallet",
      SLOW,
      async () => {
        // Mutation: a CLI without the command (rotate-token left out of COMMANDS) fails this: exit 2.
        const rotated = await run(["rotate-token"], rotating.token);
        expect(rotated.code).toBe(0);
        const printed =
          /^token (agt_[0-9a-f]{32}_[0-9a-f]{64})\n {2}\(shown once: store it now, e\.g\. export AGENT_TOKEN=\.\.\.; the old token no longer works\)\nagent ([0-9a-f-]{36})\nwallet (0x[0-9a-f]{40})\ncapabilities read, faucet, transfer\n$/.exec(
            rotated.stdout,
          );
        expect(printed, rotated.stdout).not.toBeNull();
        recordSecret(printed![1]!);
        expect([printed![2], printed![3]]).toEqual([rotating.agentId, rotating.wallet.toLowerCase()]);
        expect((await run(["balance"], rotating.token)).code).toBe(AgentAuthFailed.exitCode);
        const balance = await run(["balance", "--json"], printed![1]);
        expect(JSON.parse(balance.stdout)).toMatchObject({
          address: rotating.wallet.toLowerCase(),
          balance: "2000",
        });
      },
    );

    it.sequential(
      "watch: a transfer's events as they happen, one JSON object a line (or one human line each); Ctrl-C exits 0",
      SLOW,
      async () => {
        const to = newAccount().address.toLowerCase();
        let actionId = "";
        // From the agent's first event (it has none yet), while the transfer is made and followed.
        const json = await watch(["--after", "0", "--json"], 3, async () => {
          await sleep(1_000);
          const sent = await run(
            ["transfer", "--to", to, "--amount", "1500", "--wait", "--json"],
            watcher.token,
          );
          expect(sent.code, sent.stdout).toBe(0);
          actionId = JSON.parse(sent.stdout).action_id;
        });
        expect(json.code, json.stderr).toBe(0);
        expect(json.stderr).toBe("");
        const events = json.stdout
          .trimEnd()
          .split("\n")
          .map((line) => JSON.parse(line) as { id: string; type: string; data: Record<string, unknown> });
        // The devnet mines on arrival: signed, then confirmed in one write.
        expect(events.map((event) => [event.type, event.data.action_id])).toEqual([
          ["action.requested", actionId],
          ["action.signed", actionId],
          ["action.confirmed", actionId],
        ]);
        expect(events[2]!.data).toMatchObject({ status: "confirmed", amount: "1500", to });

        const human = await watch(["--after", events[0]!.id], 2);
        expect(human.code, human.stderr).toBe(0);
        expect(human.stdout).toMatch(
          new RegExp(
            `^\\S+Z action\\.signed ${actionId} transfer signed 0\\.0015 USDC to ${to}\n\\S+Z action\\.confirmed ${actionId} transfer confirmed 0\\.0015 USDC to ${to}\n$`,
          ),
        );
      },
    );

    it.sequential(
      "watch piped into a reader that stops (| head -1): exits 0 at its next line, no EPIPE stack trace",
      SLOW,
      async () => {
        let child: ChildProcess | undefined;
        let printed = "";
        const watching = runTool(BIN, ["watch", "--after", "0"], {
          env: { AGENT_BASE_URL: base, AGENT_TOKEN: watcher.token },
          cleanEnv: true,
          timeoutMs: 120_000,
          onSpawn: (spawned) => {
            child = spawned;
          },
          onStdout: (text) => {
            printed += text;
          },
        });
        const sendOne = async (): Promise<void> => {
          const sent = await run(
            ["transfer", "--to", newAccount().address, "--amount", "1000", "--wait", "--json"],
            watcher.token,
          );
          expect(sent.code, sent.stdout).toBe(0);
        };
        await sendOne();
        const deadline = Date.now() + 30_000;
        while (!printed.includes("\n") && Date.now() < deadline) await sleep(100);
        expect(printed).toContain("\n");
        // As `head -1` does once it has its line: the reading end of the pipe goes away.
        child!.stdout!.destroy();
        // The next events are written into a pipe nobody reads.
        await sendOne();
        const done = await watching;
        expect(done.stderr).not.toMatch(/EPIPE|Unhandled|\n\s+at /);
        expect(done.code, done.stderr).toBe(0);
      },
    );

    it.sequential(
      "watch: an x402 payment's authorization event is one human line like its action's, not the action as JSON",
      SLOW,
      async () => {
        const paid = await run(["pay", `${base}/x402/demo`, "--json"], x402Watcher.token);
        expect(paid.code, paid.stdout).toBe(0);
        // The payer's events: the action requested and signed, then the authorization signed.
        const human = await watch(["--after", "0"], 3, undefined, x402Watcher.token);
        expect(human.code, human.stderr).toBe(0);
        const authorization = human.stdout.split("\n").find((line) => line.includes(" x402.authorization."));
        expect(authorization, human.stdout).toMatch(
          new RegExp(
            `^\\S+Z x402\\.authorization\\.signed [0-9a-f-]{36} x402 signed 0\\.01 USDC to ${X402_PAY_TO}$`,
          ),
        );
      },
    );
  });

  it("never printed the agent's token", () => {
    expect(runs.length).toBeGreaterThan(10);
    for (const { stdout, stderr } of runs) {
      expect(stdout).not.toContain(agent.token);
      expect(stderr).not.toContain(agent.token);
    }
  });
});
