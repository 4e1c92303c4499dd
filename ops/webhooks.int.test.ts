import { spawnSync } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { chown, mkdir, mkdtemp, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, it } from "vitest";
import { queryRows } from "../origin/db/client.ts";
import {
  addWebhookSigningKey,
  ensureWebhookSigningKeyFile,
  loadWebhookSigningKeys,
  lockWebhookKeyFile,
  readWebhookKeyFile,
} from "../origin/webhooks/signing.ts";
import { sleep } from "../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { REPO_ROOT } from "../testing/enclave-process.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { programArgs } from "./lib/program-bundles.mjs";

// The blocks run beside each other, and so do their tests: each test has its own endpoint, its
// own database or its own key file folder, and reads only those (the count of private URLs reads
// only URLs no other test adds). Each takes `expect` from its context (docs/development.md, "Tests
// that run beside each other").
describe("npm run webhooks (operator CLI)", { concurrent: true }, () => {
  let testDb: TestDatabase;
  const run = (args: string[], env: Record<string, string> = {}): Promise<ToolRun> =>
    runTool("ops/webhooks.ts", args, { env: { DATABASE_URL: testDb.url, LOG_LEVEL: "silent", ...env } });
  const local = { AGENT_WEBHOOKS_ALLOW_PRIVATE: "true" };

  beforeAll(async () => {
    testDb = await createTestDatabase();
  });
  afterAll(async () => {
    await testDb.drop();
  });

  // In turn, before the others of this block: it reads the first endpoint `list --json` prints,
  // and the replay test adds one of its own (with deliveries pending) to the same database.
  it.sequential("add --json prints one object with the secret, once; list never shows it", async ({
    expect,
  }) => {
    const added = await run(
      ["add", "--url", "http://127.0.0.1:9/hook", "--events", "action.confirmed,action.failed", "--json"],
      local,
    );
    expect(added.stderr).toBe("");
    expect(added.code).toBe(0);
    expect(added.stdout.trim().split("\n")).toHaveLength(1);
    const body = JSON.parse(added.stdout) as Record<string, unknown>;
    expect(body).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      url: "http://127.0.0.1:9/hook",
      events: ["action.confirmed", "action.failed"],
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
    });
    const secret = String(body.secret);
    for (const args of [["list"], ["list", "--json"]]) {
      const listed = await run(args, local);
      expect(listed.code).toBe(0);
      expect(listed.stdout).toContain(String(body.id));
      expect(listed.stdout).not.toContain(secret);
      expect(listed.stdout).not.toContain(secret.slice("whsec_".length, "whsec_".length + 16));
    }
    const [json] = JSON.parse((await run(["list", "--json"], local)).stdout) as Array<
      Record<string, unknown>
    >;
    // The fields of before, and the queue's added beside them: a script reading the old ones still works.
    expect(Object.keys(json!).sort()).toEqual([
      "at_bound",
      "created_at",
      "disabled_reason",
      "enabled",
      "events",
      "id",
      "pending",
      "url",
    ]);
    expect(json).toMatchObject({ pending: 0, at_bound: false });
  });

  it("list with no endpoint says so in a line (--json: []), exit 0, rather than printing nothing", async ({
    expect,
  }) => {
    // A database of its own: the other tests of this file leave endpoints in the shared one.
    const empty = await createTestDatabase();
    try {
      const env = { DATABASE_URL: empty.url, LOG_LEVEL: "silent" };
      const listed = await runTool("ops/webhooks.ts", ["list"], { env });
      expect(listed).toEqual({
        code: 0,
        stdout:
          "webhooks: no endpoints (add one with: npm run webhooks -- add --url URL --events TYPE,...)\n",
        stderr: "",
      });
      const json = await runTool("ops/webhooks.ts", ["list", "--json"], { env });
      expect(json).toEqual({ code: 0, stdout: "[]\n", stderr: "" });
    } finally {
      await empty.drop();
    }
  });

  it("OPS_DEBUG=1 shows a refused insert's statement, stack and constraint, never the endpoint's secret it carried", async ({
    expect,
  }) => {
    // A database of its own, whose endpoints table refuses every new row: the insert that carries
    // the new secret fails in Postgres, as a full disk or a revoked grant would fail it.
    const refusing = await createTestDatabase();
    try {
      await refusing.handle.db.execute(
        sql.raw("alter table webhook_endpoints add constraint refuses_every_row check (false) not valid"),
      );
      const args = ["add", "--url", "http://127.0.0.1:9/hook", "--events", "action.confirmed"];
      const env = { ...local, DATABASE_URL: refusing.url, LOG_LEVEL: "silent" };
      for (const debug of ["0", "1"]) {
        const failed = await runTool("ops/webhooks.ts", args, { env: { ...env, OPS_DEBUG: debug } });
        expect(failed.code).toBe(3);
        expect(failed.stdout).toBe("");
        expect(failed.stderr).toContain('violates check constraint "refuses_every_row"');
        // The secret went into the statement's parameters and the row Postgres refused.
        expect(failed.stderr).not.toMatch(/whsec_/);
        if (debug === "1") {
          expect(failed.stderr).toContain("insert into webhook_endpoints");
          expect(failed.stderr).toMatch(/\n {4}at /);
          expect(failed.stderr).toContain("params: [withheld]");
        }
      }
    } finally {
      await refusing.drop();
    }
  });

  it("refuses unknown event types, wildcards and other schemes as usage errors", async ({ expect }) => {
    for (const [events, url] of [
      ["action.confirmed,action.teleported", "http://127.0.0.1:9/"],
      ["*", "http://127.0.0.1:9/"],
      ["action.confirmed", "ftp://127.0.0.1/"],
      ["action.confirmed", "file:///etc/passwd"],
    ] as const) {
      const result = await run(["add", "--url", url, "--events", events], local);
      expect(result.code, `${events} ${url}`).toBe(2);
      expect(result.stdout).toBe("");
    }
  });

  it("refuses a private address up front unless AGENT_WEBHOOKS_ALLOW_PRIVATE=true, a name that resolves to one included", async ({
    expect,
  }) => {
    for (const url of [
      "http://127.0.0.1:9/hook",
      "http://[::1]:9/hook",
      "http://169.254.169.254/latest",
      "http://10.0.0.7/hook",
      "http://100.64.0.1/hook",
      "http://[fd00::1]/hook",
      "http://[::ffff:10.0.0.1]/hook",
      "http://0.0.0.0:9/hook",
      "http://localhost:9/hook",
    ]) {
      const result = await run(["add", "--url", url, "--events", "action.confirmed"]);
      expect(result.code, url).toBe(2);
      expect(result.stderr, url).toContain("private address");
      expect(result.stdout).toBe("");
    }
    const [row] = await queryRows<{ n: number }>(
      testDb.handle.db,
      sql`select count(*)::int as n from webhook_endpoints where url like '%:9/hook' and url not like 'http://127.0.0.1:9/hook'`,
    );
    expect(row!.n).toBe(0);
  });

  it("replays an endpoint's events from an id and removes it", async ({ expect }) => {
    const added = JSON.parse(
      (await run(["add", "--url", "http://127.0.0.1:9/replay", "--events", "action.held", "--json"], local))
        .stdout,
    ) as { id: string };
    const ids = await queryRows<{ id: string }>(
      testDb.handle.db,
      sql`insert into events (agent_id, type, data) values
            (null, 'action.held', '{}'), (null, 'action.held', '{}'), (null, 'action.signed', '{}')
          returning id::text as id`,
    );
    const replayed = await run(["replay", "--id", added.id, "--from", ids[1]!.id], local);
    expect(replayed.code).toBe(0);
    expect(replayed.stdout).toContain("1 deliveries queued");
    // One event, as the console's Replay button does; an unsubscribed type queues nothing.
    const one = await run(["replay", "--id", added.id, "--event", ids[0]!.id, "--reason", "lost one"], local);
    expect(one.stdout).toContain("1 deliveries queued");
    expect((await run(["replay", "--id", added.id, "--event", ids[2]!.id], local)).stdout).toBe(
      `webhooks: 0 deliveries queued for ${added.id} (event ${ids[2]!.id} is action.signed, which the endpoint does not subscribe to)\n`,
    );
    // An event the log no longer holds (or never did): said so, not a bare 0.
    const gone = await run(["replay", "--id", added.id, "--event", "999999999"], local);
    expect(gone.code).toBe(0);
    expect(gone.stdout).toBe(
      `webhooks: 0 deliveries queued for ${added.id} (event 999999999 is not in the log: it keeps events AGENT_EVENTS_RETENTION_DAYS days)\n`,
    );
    expect((await run(["replay", "--id", added.id, "--event", "1", "--from", "1"], local)).code).toBe(2);
    // Past the log's bigint ids: a usage error, before the database is asked.
    const beyond = await run(["replay", "--id", added.id, "--from", "9223372036854775808"], local);
    expect(beyond.code).toBe(2);
    expect(beyond.stderr).toContain("--from must be an event id (a whole number up to 9223372036854775807)");
    const removed = await run(["remove", "--id", added.id], local);
    expect(removed.code).toBe(0);
    expect((await run(["remove", "--id", added.id], local)).code).toBe(1);
    // Every change is recorded as the console's are, through the channel cli.
    const changes = await queryRows<{ change: string; reason: string | null; source: string }>(
      testDb.handle.db,
      sql`select change, reason, source from webhook_endpoint_changes where endpoint_id = ${added.id}::uuid
          order by id`,
    );
    expect(changes).toEqual([
      { change: "add", reason: null, source: "cli" },
      { change: "replay", reason: null, source: "cli" },
      { change: "replay", reason: "lost one", source: "cli" },
      { change: "replay", reason: null, source: "cli" },
      { change: "replay", reason: null, source: "cli" },
      { change: "remove", reason: null, source: "cli" },
    ]);
  });
});

// docs/operations.md#exit-codes-of-the-operator-tools: a key file that cannot be read is a usage
// error (2, nothing changed), not an error (3, a change that may have been cut off half-way).
describe("npm run webhooks -- add-key / retire-key with a key file it cannot use (no database)", {
  concurrent: true,
}, () => {
  const ed25519Pem = (): string =>
    generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" }) as string;
  const cases: Array<{ name: string; make: (file: string) => Promise<void>; says: string }> = [
    { name: "missing", make: async () => {}, says: "cannot be read (ENOENT)" },
    {
      name: "not PEM",
      make: (file) => writeFile(file, "not a key\n", { mode: 0o600 }),
      says: "not a PKCS#8 PEM private key",
    },
    {
      name: "a PKCS#8 PEM key that is not Ed25519",
      make: (file) =>
        writeFile(
          file,
          generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({
            format: "pem",
            type: "pkcs8",
          }),
          { mode: 0o600 },
        ),
      says: "key 1 is not a PKCS#8 PEM Ed25519 private key",
    },
    {
      name: "an Ed25519 key group and others may read (0644)",
      make: (file) => writeFile(file, ed25519Pem(), { mode: 0o644 }),
      says: "group or others may read it (chmod 600)",
    },
  ];

  for (const each of cases) {
    it(`key file ${each.name}: exit 2 with the reason and the usage, the file and its folder untouched`, async ({
      expect,
    }) => {
      for (const args of [["add-key"], ["retire-key", "--kid", "abc"]]) {
        const dir = await mkdtemp(path.join(tmpdir(), "webhook-key-cli-"));
        const file = path.join(dir, "webhook-signing.key");
        await each.make(file);
        const before = await snapshot(dir);
        const run = await runTool("ops/webhooks.ts", args, {
          env: { AGENT_WEBHOOKS_SIGNING_KEY_FILE: file, LOG_LEVEL: "silent", DATABASE_URL: undefined },
        });
        expect(run.code, `${args[0]}: ${run.stderr}`).toBe(2);
        expect(run.stderr).toContain(each.says);
        expect(run.stderr).toContain("usage: npm run webhooks");
        expect(run.stderr).not.toContain("PRIVATE KEY");
        expect(run.stdout).toBe("");
        expect(await snapshot(dir)).toEqual(before);
      }
    });
  }

  it("a good key file: add-key exits 0; retire-key refuses an unknown kid and the only key (1)", async ({
    expect,
  }) => {
    const dir = await mkdtemp(path.join(tmpdir(), "webhook-key-cli-"));
    const file = path.join(dir, "webhook-signing.key");
    await ensureWebhookSigningKeyFile(file);
    const [first] = await loadWebhookSigningKeys(file);
    const env = { AGENT_WEBHOOKS_SIGNING_KEY_FILE: file, LOG_LEVEL: "silent", DATABASE_URL: undefined };
    const tool = (args: string[]) => runTool("ops/webhooks.ts", args, { env });
    const added = await tool(["add-key"]);
    expect(added.code, added.stderr).toBe(0);
    const kid = /key (\S+) added/.exec(added.stdout)![1]!;
    // The tool's own words with each exit code.
    const unknown = await tool(["retire-key", "--kid", "abc"]);
    expect(unknown.code, unknown.stderr).toBe(1);
    // A kid is base64url, and one in 64 starts with "-", which node's parseArgs refuses after
    // `--kid ` as an ambiguous value (exit 2: the cause of a failure once in a loaded suite);
    // `--kid=KID` takes any kid, as docs/operations.md writes it.
    const retired = await tool(["retire-key", `--kid=${kid}`]);
    expect(retired.code, retired.stderr).toBe(0);
    const last = await tool(["retire-key", `--kid=${first!.jwk.kid}`]);
    expect(last.code, last.stderr).toBe(1);
    expect(last.stderr).toContain("is the only key");
    expect((await stat(file)).mode & 0o777).toBe(0o600);
  });

  // docs/operations.md: on the local stack the tools find `.data/` themselves; `npm start` makes
  // `.data/webhook-signing.key`, and add-key answered "AGENT_WEBHOOKS_SIGNING_KEY_FILE is not set".
  it("with no variable, add-key takes the local stack's .data/webhook-signing.key", async ({ expect }) => {
    const dir = await mkdtemp(path.join(tmpdir(), "webhook-key-local-"));
    const file = path.join(dir, ".data", "webhook-signing.key");
    await mkdir(path.dirname(file), { recursive: true });
    await ensureWebhookSigningKeyFile(file);
    const env = { AGENT_WEBHOOKS_SIGNING_KEY_FILE: undefined, LOG_LEVEL: "silent", DATABASE_URL: undefined };
    const added = await runTool("ops/webhooks.ts", ["add-key"], { env, cwd: dir });
    expect(added.code, added.stderr).toBe(0);
    expect(added.stdout).toMatch(/^webhooks: key \S+ added/);
    expect(await loadWebhookSigningKeys(file)).toHaveLength(2);
  });
});

describe("npm run webhooks -- add-key / retire-key run by root on a service user's key file", {
  concurrent: true,
}, () => {
  const isRoot = process.getuid?.() === 0;
  it.skipIf(!isRoot)(
    "keep the file's owner and group, so the origin can still read it",
    async ({ expect }) => {
      // Mutation: rewriteKeyFile without its chown leaves the file root's (uid 0) after add-key.
      const dir = await mkdtemp(path.join(tmpdir(), "webhook-key-owner-"));
      const file = path.join(dir, "webhook-signing.key");
      await ensureWebhookSigningKeyFile(file);
      const SERVICE = 4_242;
      await chown(file, SERVICE, SERVICE);
      const env = { AGENT_WEBHOOKS_SIGNING_KEY_FILE: file, LOG_LEVEL: "silent", DATABASE_URL: undefined };
      const added = await runTool("ops/webhooks.ts", ["add-key"], { env });
      expect(added.code, added.stderr).toBe(0);
      const afterAdd = await stat(file);
      expect([afterAdd.uid, afterAdd.gid, afterAdd.mode & 0o777]).toEqual([SERVICE, SERVICE, 0o600]);
      const kid = /key (\S+) added/.exec(added.stdout)![1]!;
      expect((await runTool("ops/webhooks.ts", ["retire-key", `--kid=${kid}`], { env })).code).toBe(0);
      const afterRetire = await stat(file);
      expect([afterRetire.uid, afterRetire.gid, afterRetire.mode & 0o777]).toEqual([SERVICE, SERVICE, 0o600]);
    },
  );
});

describe("npm run webhooks -- add-key / retire-key beside another change of the key file", {
  concurrent: true,
}, () => {
  const env = (file: string) => ({
    AGENT_WEBHOOKS_SIGNING_KEY_FILE: file,
    LOG_LEVEL: "silent",
    DATABASE_URL: undefined,
  });
  const kids = async (file: string): Promise<string[]> =>
    (await loadWebhookSigningKeys(file)).map((key) => key.jwk.kid).sort();

  it("add-key waits for a change under way and keeps it: no key is lost", async ({ expect }) => {
    // The other change is this test, through the same steps as a second add-key: it takes the
    // file, reads it, and writes its new key only after the tool has started. Without the lock the
    // tool wrote the file as it found it, then the other change wrote over it: the tool said
    // "key … added" of a key the file no longer held.
    const dir = await mkdtemp(path.join(tmpdir(), "webhook-key-race-"));
    const file = path.join(dir, "webhook-signing.key");
    await ensureWebhookSigningKeyFile(file);
    const [first] = await kids(file);
    const locked = await lockWebhookKeyFile(file);
    if (!locked.ok) throw new Error(locked.error.message);
    const read = await readWebhookKeyFile(file);
    if (!read.ok) throw new Error(read.error.message);
    let exited = false;
    const tool = runTool("ops/webhooks.ts", ["add-key"], { env: env(file), timeoutMs: 60_000 }).finally(
      () => {
        exited = true;
      },
    );
    // Long enough for the tool to start and, unlocked, to finish (a few tenths of a second).
    const until = Date.now() + 3_000;
    while (!exited && Date.now() < until) await sleep(50);
    const other = await addWebhookSigningKey(read.value);
    await locked.value();
    const added = await tool;
    expect(added.code, added.stderr).toBe(0);
    const kid = /key (\S+) added/.exec(added.stdout)![1]!;
    expect(await kids(file)).toEqual([first!, other.jwk.kid, kid].sort());
    expect(await readdir(dir)).toEqual(["webhook-signing.key"]);
  });

  it("a lock left by a process that no longer runs is refused (1) naming it; the file is untouched", async ({
    expect,
  }) => {
    const dir = await mkdtemp(path.join(tmpdir(), "webhook-key-stale-"));
    const file = path.join(dir, "webhook-signing.key");
    await ensureWebhookSigningKeyFile(file);
    const gone = spawnSync(process.execPath, ["-e", "0"]).pid;
    await writeFile(`${file}.lock`, `${gone}\n`, { mode: 0o600 });
    const before = await snapshot(dir);
    const run = await runTool("ops/webhooks.ts", ["add-key"], { env: env(file), timeoutMs: 60_000 });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `webhooks: ${file}.lock is left by process ${gone}, which no longer runs: check the key file, remove the lock and run again\n`,
    );
    expect(await snapshot(dir)).toEqual(before);
  });

  it("a change whose lock could not be written (a full disk) leaves no lock the next one waits on", async ({
    expect,
  }) => {
    // A write refused for real: under `ulimit -f 0` every write to a file fails (EFBIG, as ENOSPC
    // on a full disk), and the tool's first is its lock's. The lock made empty and written after
    // was left empty, and every later change waited 10 s on it and said another change ran.
    const dir = await mkdtemp(path.join(tmpdir(), "webhook-key-cut-"));
    const file = path.join(dir, "webhook-signing.key");
    await ensureWebhookSigningKeyFile(file);
    const [first] = await kids(file);
    const cut = spawnSync(
      "sh",
      [
        "-c",
        'ulimit -f 0; exec "$0" "$@"',
        process.execPath,
        ...programArgs(path.resolve(REPO_ROOT, "ops/webhooks.ts")),
        "add-key",
      ],
      { env: { ...process.env, ...env(file) }, encoding: "utf8", timeout: 60_000 },
    );
    expect(cut.status, cut.stderr).toBe(1);
    expect(cut.stderr).toMatch(/^webhooks: cannot make \S+\.lock\S* \(EFBIG\)\n$/);
    expect(await kids(file)).toEqual([first!]);
    const started = Date.now();
    const next = await runTool("ops/webhooks.ts", ["add-key"], { env: env(file), timeoutMs: 60_000 });
    expect(next.code, next.stderr).toBe(0);
    expect(Date.now() - started).toBeLessThan(8_000);
    const kid = /key (\S+) added/.exec(next.stdout)![1]!;
    expect(await kids(file)).toEqual([first!, kid].sort());
    expect(await readdir(dir)).toEqual(["webhook-signing.key"]);
  });

  it("an empty lock, which no change makes, is refused at once naming it; the file is untouched", async ({
    expect,
  }) => {
    const dir = await mkdtemp(path.join(tmpdir(), "webhook-key-empty-"));
    const file = path.join(dir, "webhook-signing.key");
    await ensureWebhookSigningKeyFile(file);
    await writeFile(`${file}.lock`, "", { mode: 0o600 });
    const before = await snapshot(dir);
    const started = Date.now();
    const run = await runTool("ops/webhooks.ts", ["add-key"], { env: env(file), timeoutMs: 60_000 });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `webhooks: ${file}.lock names no process: check the key file, remove the lock and run again\n`,
    );
    expect(Date.now() - started).toBeLessThan(8_000);
    expect(await snapshot(dir)).toEqual(before);
  });
});

/** A folder's files with their modes and contents. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const files: Record<string, string> = {};
  for (const name of (await readdir(dir)).sort()) {
    const file = path.join(dir, name);
    files[name] = `${((await stat(file)).mode & 0o777).toString(8)} ${await readFile(file, "utf8")}`;
  }
  return files;
}
