import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { Agent, request } from "node:http";
import { type AddressInfo, createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, describe, expect, it } from "vitest";
import { privileged } from "../enclave/testing/capabilities.ts";
import { RawEnclaveClient } from "../enclave/testing/raw-client.ts";
import { programArgs } from "../ops/lib/program-bundles.mjs";
import { sleep } from "../shared/sleep.ts";
import { createTestDatabase } from "../testing/database.ts";
import { startEnclaveProcess } from "../testing/enclave-process.ts";
import { freePort } from "../testing/free-port.ts";
import { migrationsBefore } from "../testing/migrations-before.ts";
import { provisionedIdentity, seedFreeKeys } from "../testing/seed.ts";
import { connectDatabase, queryRows } from "./db/client.ts";
import { startEmbeddedPostgres } from "./db/embedded.ts";
import { migrateDatabase } from "./db/migrate.ts";

/** origin/main.ts as its process runs: from its bundle while current (program-bundles.mjs), else through tsx. */
const ORIGIN_MAIN = programArgs("origin/main.ts");

function processesMentioning(text: string): string[] {
  return execFileSync("ps", ["-eo", "pid=,args="], { encoding: "utf8" })
    .split("\n")
    .filter((line) => line.includes(text) && !line.includes("ps -eo"));
}

describe("origin/main.ts as a process", () => {
  let dir = "";
  afterAll(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("starts its own embedded Postgres, serves, and on SIGTERM drains and stops everything with exit 0", async () => {
    dir = await mkdtemp(path.join(tmpdir(), "origin-main-"));
    await chmod(dir, 0o755);
    const port = await freePort();
    const { DATABASE_URL: _ownDatabase, ...inherited } = process.env;
    const origin = spawn(process.execPath, ORIGIN_MAIN, {
      env: {
        ...inherited,
        EMBEDDED_PG_DIR: path.join(dir, "pg"),
        EMBEDDED_PG_PORT: String(await freePort()),
        ORIGIN_PORT: String(port),
        LOG_LEVEL: "info",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    origin.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => origin.once("exit", (code) => resolve(code)));
    const deadline = Date.now() + 60_000;
    while (!output.includes("origin listening") && Date.now() < deadline) {
      await sleep(100);
    }
    expect(output).toContain('"owns_embedded":true');

    // A keep-alive connection left idle must not hold the shutdown open.
    const agent = new Agent({ keepAlive: true });
    const status = await new Promise<number>((resolve, reject) => {
      request(`http://127.0.0.1:${port}/77/healthz`, { agent }, (res) => {
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
      })
        .on("error", reject)
        .end();
    });
    expect(status).toBe(200);
    expect(processesMentioning(dir).length).toBeGreaterThan(0);

    const started = Date.now();
    origin.kill("SIGTERM");
    expect(await exited).toBe(0);
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(output).toContain('"msg":"stopped"');
    expect(processesMentioning(dir)).toEqual([]);
    agent.destroy();
  }, 90_000);

  it("keeps its secrets out of the embedded Postgres it starts: none is in the server's environment", async () => {
    const folder = await mkdtemp(path.join(tmpdir(), "origin-main-env-"));
    try {
      await chmod(folder, 0o755);
      const pgDir = path.join(folder, "pg");
      const secrets = {
        AGENT_ADMIN_API_TOKEN: randomBytes(32).toString("hex"),
        AGENT_EDGE_SHARED_SECRET: randomBytes(32).toString("hex"),
        AGENT_REGISTRATION_IP_SECRET: randomBytes(32).toString("hex"),
        AGENT_REGISTRATION_ADMIN_SECRET: randomBytes(32).toString("hex"),
      };
      const { DATABASE_URL: _ownDatabase, ...inherited } = process.env;
      await withOrigin(
        {
          ...(inherited as Record<string, string>),
          ...secrets,
          EMBEDDED_PG_DIR: pgDir,
          EMBEDDED_PG_PORT: String(await freePort()),
        },
        async (port, output) => {
          expect(output()).toContain('"owns_embedded":true');
          // The postmaster (first line of its pid file) and every backend it forks share one environment.
          const postmaster = (await readFile(path.join(pgDir, "postmaster.pid"), "utf8")).split("\n")[0];
          const environment = await readFile(`/proc/${postmaster}/environ`, "utf8");
          expect(environment).toContain("PATH=");
          for (const [name, value] of Object.entries(secrets)) {
            expect(environment, name).not.toContain(value);
          }
          // The origin itself still holds them: the admin token opens /metrics.
          const metrics = await fetch(`http://127.0.0.1:${port}/77/metrics`, {
            headers: { authorization: `Bearer ${secrets.AGENT_ADMIN_API_TOKEN}` },
          });
          expect(metrics.status).toBe(200);
          await metrics.body?.cancel();
        },
      );
    } finally {
      await rm(folder, { recursive: true, force: true });
    }
  }, 90_000);

  it("refuses a bad configuration with one line per variable and exit 1", () => {
    let stderr = "";
    let code = 0;
    try {
      execFileSync(process.execPath, ORIGIN_MAIN, {
        env: { ...process.env, AGENT_ADMIN_API_TOKEN: "short", ORIGIN_PORT: "99999" },
        stdio: ["ignore", "ignore", "pipe"],
      });
    } catch (error) {
      const failure = error as { status: number; stderr: Buffer };
      code = failure.status;
      stderr = failure.stderr.toString();
    }
    expect(code).toBe(1);
    expect(stderr).toContain("AGENT_ADMIN_API_TOKEN: must be at least 32 bytes");
    expect(stderr).toContain("ORIGIN_PORT: must be at most 65535");
    expect(stderr).not.toContain("short");
  });

  /** Runs origin/main.ts until it logs "origin listening", calls `check`, then stops it. */
  const withOrigin = async (
    env: Record<string, string>,
    check: (port: number, output: () => string) => Promise<void>,
  ): Promise<void> => {
    const port = await freePort();
    const origin = spawn(process.execPath, ORIGIN_MAIN, {
      env: { ...process.env, ...env, ORIGIN_PORT: String(port), LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    origin.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => origin.once("exit", (code) => resolve(code)));
    try {
      const deadline = Date.now() + 60_000;
      while (!output.includes("origin listening") && Date.now() < deadline && origin.exitCode === null) {
        await sleep(100);
      }
      expect(output).toContain("origin listening");
      await check(port, () => output);
    } finally {
      origin.kill("SIGTERM");
      await exited;
    }
  };

  it("with the admin key only, logs the enclave's sealed policy at start and serves it on /healthz", async () => {
    const database = await createTestDatabase();
    const enclave = await startEnclaveProcess({ envId: "main-env" });
    try {
      const { client } = await RawEnclaveClient.connect(enclave.socketPath);
      const policy = {
        per_tx_limit_units: "10000000",
        daily_limit_units: "100000000",
        recipient_allowlist: ["0x1111111111111111111111111111111111111111"],
        x402_amount_units: null,
        x402_pay_to: null,
        x402_max_timeout_seconds: 180,
        operator_pool: "0x00000000000000000000000000000000000000aa",
        fee_ceiling_wei: "1000000000000000",
        x402_validity_margin_seconds: 6,
        x402_daily_limit: 1000,
        settler_daily_fee_units: "1000000000",
      };
      await privileged(client, enclave, "configure_policy", policy);
      client.close();
      const adminKeyFile = path.join(enclave.dir, "admin-authority.key");
      await writeFile(adminKeyFile, `${Buffer.from(enclave.adminSecret).toString("hex")}\n`, { mode: 0o600 });
      // The origin's whole enclave configuration: the socket and the admin key (key-pool refills).
      await withOrigin(
        {
          DATABASE_URL: database.url,
          AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
          AGENT_ADMIN_AUTHORITY_KEY_FILE: adminKeyFile,
          AGENT_ENV_ID: "main-env",
        },
        async (port, output) => {
          const line = output()
            .split("\n")
            .find((entry) => entry.includes('"msg":"enclave policy"'));
          expect(JSON.parse(line ?? "{}")).toMatchObject({
            level: 30,
            policy_version: 1,
            per_tx_limit_units: "10000000",
            daily_limit_units: "100000000",
            fee_ceiling_wei: "1000000000000000",
            allowlist_size: 1,
            x402_amount_units: null,
            x402_pay_to: null,
            settler_daily_fee_units: "1000000000",
          });
          const health = await fetch(`http://127.0.0.1:${port}/77/healthz`);
          expect(await health.json()).toMatchObject({
            enclave: { configured: true, ok: true, policy_version: 1, policy },
          });
        },
      );
    } finally {
      await enclave.dispose();
      await database.drop();
    }
  }, 90_000);

  it("refuses to start with an admin key file group or others may read, naming it, and exit 1", async () => {
    const database = await createTestDatabase();
    const enclave = await startEnclaveProcess({ envId: "main-env" });
    try {
      const adminKeyFile = path.join(enclave.dir, "admin-authority.key");
      await writeFile(adminKeyFile, `${Buffer.from(enclave.adminSecret).toString("hex")}\n`);
      await chmod(adminKeyFile, 0o644);
      const origin = spawn(process.execPath, ORIGIN_MAIN, {
        env: {
          ...process.env,
          DATABASE_URL: database.url,
          AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
          AGENT_ADMIN_AUTHORITY_KEY_FILE: adminKeyFile,
          AGENT_ENV_ID: "main-env",
          AGENT_GATEWAY_ENABLED: "true",
          ORIGIN_PORT: String(await freePort()),
          LOG_LEVEL: "info",
        },
        stdio: ["ignore", "pipe", "pipe"],
      });
      let stdout = "";
      let stderr = "";
      origin.stdout.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
      });
      origin.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const exited = new Promise<number | null>((resolve) => origin.once("exit", (code) => resolve(code)));
      // Mutation: read only when first used (the key pool's refill), the key is refused in a log
      // line while the origin serves on, without the admin capability it was configured with.
      const listening = (async () => {
        const deadline = Date.now() + 60_000;
        while (!stdout.includes("origin listening") && Date.now() < deadline) await sleep(100);
        // Long enough for the refill's first round to read the key.
        await sleep(5_000);
        return "still running" as const;
      })();
      const code = await Promise.race([exited, listening]);
      if (code === "still running") {
        origin.kill("SIGTERM");
        await exited;
      }
      expect(code).toBe(1);
      expect(stderr).toContain(
        `origin: ${adminKeyFile}: group or others may read this private key (chmod 600)`,
      );
      expect(stdout).not.toContain("origin listening");
    } finally {
      await enclave.dispose();
      await database.drop();
    }
  }, 90_000);

  it("with the gateway switch off starts no background worker (identity sweep, batch sweeper); on, they run at once", async () => {
    const database = await createTestDatabase();
    try {
      // What the workers would touch at their first tick: an identity never verified (the sweep
      // records a finding for it; with no enclave configured, terminal_unknown) and a key batch
      // stuck in `requested` for an hour (the batch sweeper fails it).
      await seedFreeKeys(database.handle.db, 1);
      await provisionedIdentity(database.handle.db, { capabilities: ["read"], origin: "operator" });
      await database.handle.db.execute(
        sql`insert into key_batches (size, status, status_changed_at) values (1, 'requested', now() - interval '1 hour')`,
      );
      const touched = async () =>
        (
          await queryRows<{ findings: number; failed: number }>(
            database.handle.db,
            sql`select (select count(*)::int from identity_findings) as findings,
                       (select count(*)::int from key_batches where status = 'failed') as failed`,
          )
        )[0]!;
      const env = { DATABASE_URL: database.url, KEY_BATCH_STUCK_SECONDS: "60" };
      await withOrigin(env, async () => {
        // Both workers tick as soon as they start; three seconds is ample for a first tick.
        await sleep(3_000);
        expect(await touched()).toEqual({ findings: 0, failed: 0 });
      });
      await withOrigin({ ...env, AGENT_GATEWAY_ENABLED: "true" }, async () => {
        await expect.poll(touched, { timeout: 10_000 }).toEqual({ findings: 1, failed: 1 });
      });
    } finally {
      await database.drop();
    }
  }, 90_000);

  it("names the console where its passkeys work: localhost on a loopback listener, CONSOLE_ORIGIN when set", async () => {
    const database = await createTestDatabase();
    const consoleOf = (output: string): unknown =>
      JSON.parse(output.split("\n").find((line) => line.includes('"msg":"origin listening"')) ?? "{}")
        .console;
    const env = {
      DATABASE_URL: database.url,
      AGENT_ADMIN_API_TOKEN: "a".repeat(43),
      AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${path.join(tmpdir(), "no-such-enclave.sock")}`,
    };
    try {
      // The listener is 127.0.0.1, where a browser makes no passkey (an IP address is no rpId).
      await withOrigin(env, async (port, output) => {
        expect(consoleOf(output())).toBe(`http://localhost:${port}/77/admin/agents`);
      });
      await withOrigin({ ...env, CONSOLE_ORIGIN: "https://console.example.test" }, async (_port, output) => {
        expect(consoleOf(output())).toBe("https://console.example.test/77/admin/agents");
      });
    } finally {
      await database.drop();
    }
  }, 90_000);

  /** Kills what is left of an embedded cluster under `folder` (a postmaster a test's origin left running). */
  const killLeftPostgres = async (folder: string): Promise<void> => {
    const pid = Number(
      (await readFile(path.join(folder, "postmaster.pid"), "utf8").catch(() => "")).split("\n")[0],
    );
    if (pid > 0 && processesMentioning(folder).some((line) => line.trim().startsWith(`${pid} `)))
      process.kill(pid, "SIGKILL");
  };

  /** The origin's processes until it exits, its exit code (null: ended by a signal) and its output. */
  const spawnOrigin = (env: Record<string, string>) => {
    const { DATABASE_URL: _ownDatabase, ...inherited } = process.env;
    const origin = spawn(process.execPath, ORIGIN_MAIN, {
      env: { ...inherited, LOG_LEVEL: "info", ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    origin.stdout.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    origin.stderr.on("data", (chunk: Buffer) => {
      output += chunk.toString();
    });
    const exited = new Promise<number | null>((resolve) => origin.once("exit", (code) => resolve(code)));
    return { origin, exited, output: () => output };
  };

  it.each(["SIGTERM", "SIGINT"] as const)(
    "stopped by %s while it starts its embedded Postgres, stops that Postgres too and exits 0",
    async (signal) => {
      const folder = await mkdtemp(path.join(tmpdir(), "origin-start-stop-"));
      await chmod(folder, 0o755);
      const pgDir = path.join(folder, "pg");
      try {
        const { origin, exited, output } = spawnOrigin({
          EMBEDDED_PG_DIR: pgDir,
          EMBEDDED_PG_PORT: String(await freePort()),
          ORIGIN_PORT: String(await freePort()),
        });
        // The server is up and the origin has not listened yet: it creates the database and migrates.
        const deadline = Date.now() + 60_000;
        while (
          !processesMentioning(pgDir).some((line) => line.includes(`postgres -D ${pgDir}`)) &&
          Date.now() < deadline
        ) {
          await sleep(20);
        }
        expect(output()).not.toContain("origin listening");
        origin.kill(signal);
        const code = await exited;
        // Not left running, holding the data folder and its port for the next start.
        expect(processesMentioning(pgDir)).toEqual([]);
        expect(code).toBe(0);
        expect(output()).toContain('"msg":"stopped"');
        expect(output()).not.toContain("origin listening");
      } finally {
        await killLeftPostgres(pgDir);
        await rm(folder, { recursive: true, force: true });
      }
    },
    90_000,
  );

  it("refused by a migration of its embedded Postgres, names it, exits 1 and stops that Postgres", async () => {
    const folder = await mkdtemp(path.join(tmpdir(), "origin-migration-refused-"));
    await chmod(folder, 0o755);
    const pgDir = path.join(folder, "pg");
    const pgPort = await freePort();
    const before = await migrationsBefore("0048_webhook_secret_rotation");
    try {
      // A cluster one migration behind, whose last migration cannot apply: its column is there already.
      const cluster = await startEmbeddedPostgres({ dir: pgDir, port: pgPort });
      const database = connectDatabase({ url: cluster.url, driver: "pg" });
      try {
        await migrateDatabase(database.db, before);
        await database.db.execute(sql`alter table webhook_endpoints add column previous_secret text`);
      } finally {
        await database.close();
        await cluster.stop();
      }
      const { exited, output } = spawnOrigin({
        EMBEDDED_PG_DIR: pgDir,
        EMBEDDED_PG_PORT: String(pgPort),
        ORIGIN_PORT: String(await freePort()),
      });
      expect(await exited).toBe(1);
      expect(output()).toContain("migration 0048_webhook_secret_rotation failed");
      // Not left running, holding the data folder and its port for the next start.
      expect(processesMentioning(pgDir)).toEqual([]);
    } finally {
      await killLeftPostgres(pgDir);
      await rm(before, { recursive: true, force: true });
      await rm(folder, { recursive: true, force: true });
    }
  }, 90_000);

  it("refuses a port another program holds (a second origin), naming ORIGIN_PORT, and an address not of this machine, naming ORIGIN_HOST; exit 1", async () => {
    const database = await createTestDatabase();
    const held = createServer();
    await new Promise<void>((resolve) => held.listen(0, "127.0.0.1", resolve));
    const heldPort = (held.address() as AddressInfo).port;
    try {
      const second = spawnOrigin({ DATABASE_URL: database.url, ORIGIN_PORT: String(heldPort) });
      expect(await second.exited).toBe(1);
      expect(second.output()).toContain(
        `origin: ORIGIN_PORT: 127.0.0.1:${heldPort} is in use by another program`,
      );

      // 192.0.2.1: TEST-NET-1, never an address of this machine.
      const elsewhere = spawnOrigin({
        DATABASE_URL: database.url,
        ORIGIN_HOST: "192.0.2.1",
        AGENT_ALLOW_PUBLIC_BIND: "1",
        ORIGIN_PORT: String(await freePort()),
      });
      expect(await elsewhere.exited).toBe(1);
      expect(elsewhere.output()).toContain(
        "origin: ORIGIN_HOST: 192.0.2.1 is not an address of this machine",
      );
    } finally {
      await new Promise((resolve) => held.close(resolve));
      await database.drop();
    }
  }, 90_000);

  it("starts anyway, with a warning, when the configured enclave does not answer", async () => {
    const database = await createTestDatabase();
    try {
      await withOrigin(
        {
          DATABASE_URL: database.url,
          AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${path.join(tmpdir(), "no-such-enclave.sock")}`,
        },
        async (port, output) => {
          expect(output()).toContain("enclave policy unavailable at start");
          const health = await fetch(`http://127.0.0.1:${port}/77/healthz`);
          expect(health.status).toBe(200);
          expect(await health.json()).toMatchObject({
            status: "degraded",
            enclave: { configured: true, ok: false, error: "signer_unreachable" },
          });
        },
      );
    } finally {
      await database.drop();
    }
  }, 90_000);
});
