import { type ChildProcessWithoutNullStreams, execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { chmod, mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { currentBundle } from "../ops/lib/program-bundles.mjs";
import { signerPolicyToWire } from "../origin/signer/op-codecs.ts";
import { sleep } from "../shared/sleep.ts";
import { launcherEnv, runLauncherToExit } from "../testing/launcher.ts";
import { runTool } from "../testing/run-tool.ts";
import { recordOutput } from "../testing/secret-sink.ts";
import { LOCAL_FAUCET_TERMS, LOCAL_POLICY, LOCAL_TREASURY_BUDGET_UNITS } from "./local-policy.ts";

/** The environment of a running process, as the kernel holds it (Linux). */
async function environmentOf(pid: number): Promise<string[]> {
  return (await readFile(`/proc/${pid}/environ`, "utf8")).split("\0");
}

/** The pid of the launcher's child running `entry`'s bundle (the suite's setup built them all). */
function childRunning(launcherPid: number, entry: string): number {
  const bundle = currentBundle(entry);
  if (!bundle) throw new Error(`${entry} has no current bundle`);
  const out = execFileSync("ps", ["-eo", "pid=,ppid=,args="], { encoding: "utf8" });
  const line = out
    .split("\n")
    .map((row) => row.trim().split(/\s+/))
    .find(([, ppid, ...args]) => Number(ppid) === launcherPid && args.join(" ").includes(bundle));
  if (!line) throw new Error(`no child running ${entry}`);
  return Number(line[0]);
}

/** Processes whose command line mentions the folder: the stack's parts while it runs. */
function processesMentioning(text: string): string[] {
  const out = execFileSync("ps", ["-eo", "pid=,args="], { encoding: "utf8" });
  return out.split("\n").filter((line) => line.includes(text) && !line.includes("ps -eo"));
}

/** The base64 lines of a PEM file: none may appear in anything printed. */
function pemBody(pem: string): string[] {
  return pem.split("\n").filter((line) => line.length > 20 && !line.startsWith("-----"));
}

/** `npm start` (dev/start.mjs) on `env`, its output collected as it comes. */
function launch(env: Record<string, string>): {
  launcher: ChildProcessWithoutNullStreams;
  output: () => string;
  exited: Promise<number | null>;
} {
  const launcher = spawn(process.execPath, ["dev/start.mjs"], {
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "pipe"],
  });
  let output = "";
  let partial = "";
  launcher.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
    // npm start gives its edge no output sink (dev/edge.ts): the lines it prints as `[edge] …` go
    // to the run's secret scan from here, as testing/edge.ts sends an edge started in-process.
    // Not the launcher's own lines, which print the local agent's token on purpose.
    const lines = (partial + chunk.toString()).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines)
      if (line.startsWith("[edge] ")) recordOutput("edge", line.slice("[edge] ".length));
  });
  launcher.stderr.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => launcher.once("exit", (code) => resolve(code)));
  return { launcher, output: () => output, exited };
}

/** Waits until the launcher's output holds `text` (or it exits, or `ms` pass). */
async function waitForOutput(run: ReturnType<typeof launch>, text: string, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!run.output().includes(text) && Date.now() < deadline) {
    if (run.launcher.exitCode !== null) break;
    await sleep(100);
  }
}

describe("npm start (the local stack launcher)", () => {
  let dataDir = "";
  let operatorKeyFile = "";
  let operatorKeyId = "";
  let env: Record<string, string> = {};
  let run: ReturnType<typeof launch>;
  let token = "";
  afterAll(async () => {
    if (run && run.launcher.exitCode === null) {
      run.launcher.kill("SIGINT");
      await run.exited;
    }
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it("serves /77/healthz and prints its URLs", async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "agents-start-"));
    await chmod(dataDir, 0o755);
    env = await launcherEnv(dataDir);
    const originPort = Number(env.ORIGIN_PORT);
    const edgePort = Number(env.EDGE_PORT);
    run = launch(env);
    const { launcher } = run;

    // The whole stack, its policy, treasury, settler, drill and first agent: minutes on a loaded host.
    await waitForOutput(run, "Ctrl-C stops everything", 180_000);
    const output = run.output();
    expect(output).toContain("Ctrl-C stops everything");
    expect(output).toContain(`http://127.0.0.1:${originPort}/77/healthz`);
    expect(output).toContain(`[start] edge       http://127.0.0.1:${edgePort}/77\n`);
    // The console: its URL and where its tokens are, never the tokens; they open it.
    // At localhost, the console's origin, where its passkeys work too (not at an IP address).
    const consoleUrl = `http://localhost:${originPort}/77/admin/agents`;
    expect(output).toContain(`[start] console    ${consoleUrl} (private origin only)`);
    const localSecrets = JSON.parse(
      await readFile(path.join(dataDir, "local-secrets.json"), "utf8"),
    ) as Record<string, string>;
    for (const value of Object.values(localSecrets)) expect(output).not.toContain(value);
    const overview = await fetch(`${consoleUrl}/registration`, {
      headers: { "x-admin-api-token": localSecrets.adminApiToken! },
    });
    expect(overview.status).toBe(200);

    const health = await fetch(`http://127.0.0.1:${originPort}/77/healthz`);
    expect(health.status).toBe(200);
    // The enclave was given the local policy and a treasury with the policy key, and the origin
    // reads both back live.
    expect(await health.json()).toMatchObject({
      status: "ok",
      database: { ok: true },
      chain: { ok: true },
      enclave: {
        configured: true,
        ok: true,
        policy_version: 1,
        // The demo is paid to the enclave's payee key, made at init (docs/x402.md#offers-and-receipts).
        policy: {
          ...signerPolicyToWire(LOCAL_POLICY),
          x402_pay_to: expect.stringMatching(/^0x[0-9a-f]{40}$/),
        },
        treasury: {
          budget_units: LOCAL_TREASURY_BUDGET_UNITS.toString(),
          spent_units: "0",
          payout_units: LOCAL_FAUCET_TERMS.payoutUnits.toString(),
          cooldown_ms: LOCAL_FAUCET_TERMS.cooldownMs,
          daily_limit_units: LOCAL_FAUCET_TERMS.dailyLimitUnits.toString(),
        },
      },
    });
    // The keys the enclave made outside a refill (treasury, settler) are backed up at start.
    const backups = await readdir(path.join(dataDir, "backups"));
    expect(backups.filter((name) => /^(treasury|settler)-\d+\.backup$/.test(name)).sort()).toEqual([
      expect.stringMatching(/^settler-/),
      expect.stringMatching(/^treasury-/),
    ]);
    // The local stack holds every key, but the origin is given the admin key only.
    const policyKeyFile = path.join(dataDir, "policy-authority.key");
    expect((await stat(policyKeyFile)).mode & 0o777).toBe(0o600);
    const policySeed = (await readFile(policyKeyFile, "utf8")).trim();
    const originEnv = await environmentOf(childRunning(launcher.pid!, "origin/main.ts"));
    expect(originEnv).toContain(
      `AGENT_ADMIN_AUTHORITY_KEY_FILE=${path.join(dataDir, "admin-authority.key")}`,
    );
    expect(
      originEnv.filter((entry) => entry.includes("policy-authority") || entry.includes(policySeed)),
    ).toEqual([]);
    // The local operator key: made once (0600) and enrolled in the enclave; its path and how to
    // approve a held action are printed, never its contents.
    operatorKeyFile = path.join(dataDir, "operator.key");
    expect((await stat(operatorKeyFile)).mode & 0o777).toBe(0o600);
    const operatorLine = /\[start\] operator {3}(\S+) \(operator key (op-[0-9a-f]{16}), enrolled/.exec(
      output,
    );
    expect(operatorLine?.[1]).toBe(operatorKeyFile);
    operatorKeyId = operatorLine?.[2] ?? "";
    // The data folder and Postgres port are not the defaults the operator tools assume: the printed
    // command names them, the admin key and the socket, so it runs against this stack as printed.
    expect(output).toContain(
      `[start]            EMBEDDED_PG_DIR=${path.join(dataDir, "pg")} EMBEDDED_PG_PORT=${env.EMBEDDED_PG_PORT} AGENT_ADMIN_AUTHORITY_KEY_FILE=${path.join(dataDir, "admin-authority.key")} npm run policy -- approve --agent ID --action ID --operator-key ${operatorKeyFile} --socket ${path.join(dataDir, "enclave.sock")}\n`,
    );
    for (const line of pemBody(await readFile(operatorKeyFile, "utf8"))) expect(output).not.toContain(line);
    const sealedKeys = await runTool("ops/enclave-policy.ts", [
      "show",
      "--json",
      "--socket",
      path.join(dataDir, "enclave.sock"),
    ]);
    expect(JSON.parse(sealedKeys.stdout)).toMatchObject({
      operator_keys: [{ key_id: operatorKeyId, label: "local stack" }],
    });
    // Every part runs: postgres, the devnet (its state file), the enclave (its socket), the origin.
    const running = processesMentioning(dataDir).join("\n");
    expect(running).toContain("postgres");
    expect(running).toContain(currentBundle("devnet/main.ts"));
    expect(running).toContain(currentBundle("enclave/main.ts"));

    // The printed operator token works against the gateway, on a wallet the enclave made.
    token = /\[start\] token {6}(agt_\S+)/.exec(output)?.[1] ?? "";
    expect(token).not.toBe("");
    const network = await fetch(`http://127.0.0.1:${originPort}/77/agent/v1/balance`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(network.status).toBe(200);
    expect(await network.json()).toMatchObject({ balance: "100000000", symbol: "USDC" });

    // The edge, last part of the stack, routes the gateway to the origin and keeps healthz private.
    const throughEdge = await fetch(`http://127.0.0.1:${edgePort}/77/agent/v1/network`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(throughEdge.status).toBe(200);
    expect(await throughEdge.json()).toMatchObject({ api_version: "v1", chain: { chain_id: 77 } });
    // Public registration is switched on, its policy paused as the spec's initial policy is.
    const register = await fetch(`http://127.0.0.1:${edgePort}/77/agent/v1/register`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-svc-registration": "1" },
      body: "{}",
    });
    expect(register.status).toBe(503);
    expect(await register.json()).toMatchObject({
      error: { code: "registration_unavailable", reason: "paused" },
    });
    const edgeHealth = await fetch(`http://127.0.0.1:${edgePort}/77/healthz`);
    expect(edgeHealth.status).toBe(404);
    expect(await edgeHealth.json()).toMatchObject({ error: { code: "not_found" } });

    // The registration line says what the database holds: the spec's initial policy, paused, and
    // the command that opens it names this stack's database.
    expect(output).toContain(
      `[start] register   switched on, policy paused: EMBEDDED_PG_DIR=${path.join(dataDir, "pg")} EMBEDDED_PG_PORT=${env.EMBEDDED_PG_PORT} npm run registration -- open --reason "local testing"\n`,
    );
    expect(launcher.exitCode).toBeNull();
  }, 240_000);

  // A second `npm start` on the folder of a running stack was told its Postgres might be one a
  // killed run left, with `kill PID` to stop it: that PID was the running stack's database.
  it("refuses a second start on the folder while it runs, naming the running stack, and leaves it serving", async () => {
    const second = await runLauncherToExit(env);
    expect(second.code).toBe(1);
    expect(second.output).toContain(
      `[start] failed: a stack is already running on ${dataDir} (its Postgres and its enclave on ${path.join(dataDir, "enclave.sock")} answer): use it, or stop it with Ctrl-C where it runs`,
    );
    expect(second.output).not.toContain("kill ");
    const health = await fetch(`http://127.0.0.1:${env.ORIGIN_PORT}/77/healthz`);
    expect(health.status).toBe(200);
    expect(run.launcher.exitCode).toBeNull();
  }, 60_000);

  // Mutation: dev/start.ts without restartEnclave (the enclave's exit stops the stack) fails this:
  // no restart line, and the launcher exits 1.
  it("restarts an enclave that dies, and the stack signs again", async () => {
    const base = `http://127.0.0.1:${env.ORIGIN_PORT}/77`;
    const transfer = (key: string) =>
      fetch(`${base}/agent/v1/transfers`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({
          idempotency_key: key,
          to: "0x1111111111111111111111111111111111111111",
          amount: "1",
        }),
      });
    const enclave = childRunning(run.launcher.pid!, "enclave/main.ts");
    process.kill(enclave, "SIGKILL");
    await waitForOutput(run, "[start] enclave    ready again", 60_000);
    expect(run.output()).toContain(
      "[start] enclave    exited (SIGKILL); restarting it on the same socket and data folder",
    );
    expect(run.output()).toContain("[start] enclave    ready again on");
    expect(run.launcher.exitCode).toBeNull();
    const restarted = childRunning(run.launcher.pid!, "enclave/main.ts");
    expect(restarted).not.toBe(enclave);

    // A transfer signed by the restarted enclave: its keys, policy and counters are the ones it had.
    // The origin's client may still be waiting out its reconnection delay: the same key again
    // (nothing was signed) until it answers.
    const key = `start-test-${randomUUID()}`;
    let answer = await transfer(key);
    const deadline = Date.now() + 60_000;
    while (answer.status === 503 && Date.now() < deadline) {
      await answer.body?.cancel();
      await sleep(500);
      answer = await transfer(key);
    }
    expect([200, 202]).toContain(answer.status);
    expect(await answer.json()).toMatchObject({
      kind: "transfer",
      tx_hash: expect.stringMatching(/^0x[0-9a-f]{64}$/),
    });
  }, 120_000);

  it("stops every part on Ctrl-C", async () => {
    const { launcher } = run;
    const originPort = Number(env.ORIGIN_PORT);
    const edgePort = Number(env.EDGE_PORT);
    // Opened while it runs, for the next test's start to find, with the variables the launcher
    // printed (from a folder with no .data of its own, where the defaults would find nothing).
    const printed = /policy paused: EMBEDDED_PG_DIR=(\S+) EMBEDDED_PG_PORT=(\d+) npm run registration/.exec(
      run.output(),
    );
    const opened = await runTool("ops/registration.ts", ["open", "--reason", "start test"], {
      env: { EMBEDDED_PG_DIR: printed?.[1], EMBEDDED_PG_PORT: printed?.[2] },
      cwd: dataDir,
    });
    expect(opened.code, opened.stderr).toBe(0);
    const exited = run.exited;
    const output = (): string => run.output();
    launcher.kill("SIGINT");
    expect(await exited).toBe(0);
    expect(output()).toContain("postgres stopped");
    // Nothing the launcher started may outlive it.
    expect(processesMentioning(dataDir)).toEqual([]);
    await expect(fetch(`http://127.0.0.1:${originPort}/77/healthz`)).rejects.toThrow();
    // The edge's workerd went with it: its port no longer answers.
    expect(output()).toContain("edge stopped");
    await expect(fetch(`http://127.0.0.1:${edgePort}/77/agent/v1/network`)).rejects.toThrow();
  }, 120_000);

  // Mutation: dev/start.ts printing the paused line whatever the database says fails this.
  it("prints registration's state from the database when started again (open)", async () => {
    run = launch(env);
    await waitForOutput(run, "Ctrl-C stops everything", 180_000);
    expect(run.output()).toContain(
      "[start] register   open (3 a day per address, 100 a day in all): agent-wallet register",
    );
    expect(run.output()).not.toContain("policy paused");
    // The same operator key, enrolled again as it was: a restart makes no second one.
    expect(run.output()).toContain(
      `[start] operator   ${operatorKeyFile} (operator key ${operatorKeyId}, enrolled`,
    );
    run.launcher.kill("SIGINT");
    expect(await run.exited).toBe(0);
  }, 240_000);
});
