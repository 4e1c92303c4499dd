import { existsSync } from "node:fs";
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import net from "node:net";
import { tmpdir, userInfo } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { freePort } from "../../testing/free-port.ts";
import { runTool } from "../../testing/run-tool.ts";
import { startEmbeddedPostgres } from "./embedded.ts";

// Under root the cluster runs as the `postgres` user. A data folder made private (a umask of 077,
// or a tool that made `.data/backups` first with its parents 0700) kept that user out, and
// `npm start` failed with initdb's "Permission denied".
describe.runIf(userInfo().uid === 0)("the embedded Postgres under root", () => {
  let folder = "";
  afterAll(async () => {
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  it("starts in a data folder that is 0700, which it lets others enter but not list", async () => {
    folder = await mkdtemp(path.join(tmpdir(), "agents-embedded-"));
    await chmod(folder, 0o755);
    const dataDir = path.join(folder, "data");
    await mkdir(dataDir, { mode: 0o700 });
    expect((await stat(dataDir)).mode & 0o777).toBe(0o700);

    const cluster = await startEmbeddedPostgres({ dir: path.join(dataDir, "pg"), port: await freePort() });
    try {
      const client = new pg.Client({ connectionString: cluster.url });
      await client.connect();
      const { rows } = await client.query<{ answer: number }>("select 41 + 1 as answer");
      await client.end();
      expect(rows[0]?.answer).toBe(42);
    } finally {
      await cluster.stop();
    }
    expect((await stat(dataDir)).mode & 0o777).toBe(0o701);
    expect((await stat(`${path.join(dataDir, "pg")}.password`)).mode & 0o777).toBe(0o600);
  });
});

// The package rejects with nothing when its server exits before it is ready, and an operator tool
// whose embedded cluster's port was taken said only "agents: error:".
describe("the embedded Postgres on a port that is taken", () => {
  let folder = "";
  const holders: net.Server[] = [];
  afterAll(async () => {
    for (const holder of holders) await new Promise((done) => holder.close(done));
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  /** A port held on the loopback addresses the cluster would listen on. */
  async function takenPort(): Promise<number> {
    const hold = (port: number, host: string): Promise<boolean> =>
      new Promise((done) => {
        const holder = net.createServer();
        holder.once("error", () => done(false));
        holder.listen(port, host, () => {
          holders.push(holder);
          done(true);
        });
      });
    const port = await freePort();
    if (!(await hold(port, "127.0.0.1"))) throw new Error(`port ${port} could not be held`);
    await hold(port, "::1"); // where the machine has IPv6's loopback, "localhost" is both
    return port;
  }

  it("fails with the server's own reason", async () => {
    folder = await mkdtemp(path.join(tmpdir(), "agents-embedded-taken-"));
    const dir = path.join(folder, "pg");
    const port = await takenPort();

    const failure = await startEmbeddedPostgres({ dir, port }).then(
      () => new Error("the cluster started on a taken port"),
      (error: unknown) => error,
    );
    expect(failure).toBeInstanceOf(Error);
    expect((failure as Error).message).toMatch(
      new RegExp(`^the embedded Postgres did not start on port ${port} .*Address already in use.*FATAL: `),
    );
  });

  // A stack started on another data folder holds the port, and the README's
  // `npm run registration -- open` run beside it initialised a cluster in .data/pg, then said only
  // Postgres's "Address already in use … wait a few seconds and retry".
  it("an operator tool names EMBEDDED_PG_PORT and EMBEDDED_PG_DIR, exit 3, and makes no cluster", async () => {
    const toolFolder = await mkdtemp(path.join(tmpdir(), "agents-embedded-taken-tool-"));
    try {
      const dir = path.join(toolFolder, "pg");
      const port = await takenPort();
      const tool = await runTool("ops/registration.ts", ["status"], {
        env: {
          DATABASE_URL: undefined,
          EMBEDDED_PG_DIR: dir,
          EMBEDDED_PG_PORT: String(port),
          LOG_LEVEL: "silent",
        },
      });
      expect(tool.code).toBe(3);
      expect(tool.stderr).toBe(
        `registration: error: port ${port} (EMBEDDED_PG_PORT) is in use by another program, and no embedded Postgres runs on ${dir} (EMBEDDED_PG_DIR): ` +
          "for a stack started on another data folder, point the tool at that folder's cluster with " +
          "EMBEDDED_PG_DIR=<its data folder>/pg; else give this one a free port with EMBEDDED_PG_PORT, or set DATABASE_URL\n",
      );
      expect(existsSync(path.join(dir, "PG_VERSION"))).toBe(false);
    } finally {
      await rm(toolFolder, { recursive: true, force: true });
    }
  });
});

// initdb takes the cluster's password from a file, which the package wrote to the shared temp
// folder with the default mode (0644 under a umask of 022) and left there for as long as initdb
// ran: any local user could read the password of the cluster's superuser, the password it keeps
// for good, and connect to 127.0.0.1 with it.
describe("the embedded Postgres's first start", () => {
  let folder = "";
  afterAll(async () => {
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  it("never writes the cluster's password where other local users can read it", async () => {
    folder = await mkdtemp(path.join(tmpdir(), "agents-embedded-pwfile-"));
    await chmod(folder, 0o755);
    const dir = path.join(folder, "pg");
    // Every file readable by others in the shared temp folder while the cluster initialises, as
    // another local user polling it would read them.
    const readable = new Map<string, string>();
    let watching = true;
    const watch = (async () => {
      while (watching) {
        for (const name of await readdir(tmpdir()).catch(() => [])) {
          if (!name.startsWith("pg-password-") || readable.has(name)) continue;
          const file = path.join(tmpdir(), name);
          const mode = await stat(file).then(
            (found) => found.mode,
            () => 0,
          );
          if ((mode & 0o004) === 0) continue;
          const text = await readFile(file, "utf8").catch(() => "");
          if (text !== "") readable.set(name, text.trim());
        }
        await sleep(2);
      }
    })();
    const cluster = await startEmbeddedPostgres({ dir, port: await freePort() }).finally(async () => {
      watching = false;
      await watch;
    });
    try {
      // The package's file was there to be read (the watch works) …
      expect(readable.size).toBeGreaterThan(0);
      // … but never held the password the cluster keeps, which still opens it.
      const password = (await readFile(`${dir}.password`, "utf8")).trim();
      expect([...readable.values()]).not.toContain(password);
      const client = new pg.Client({ connectionString: cluster.url });
      await client.connect();
      const { rows } = await client.query<{ answer: number }>("select 41 + 1 as answer");
      await client.end();
      expect(rows[0]?.answer).toBe(42);
    } finally {
      await cluster.stop();
    }
  });
});

describe("the embedded Postgres's stop", () => {
  let folder = "";
  afterAll(async () => {
    if (folder) await rm(folder, { recursive: true, force: true });
  });

  it("returns when the server died on its own (killed) before it was asked to stop", async () => {
    // Mutation: the package's stop() alone waits for an exit event that has already passed, for
    // good; `npm start` and the soak then never end.
    folder = await mkdtemp(path.join(tmpdir(), "agents-embedded-died-"));
    const dir = path.join(folder, "pg");
    const cluster = await startEmbeddedPostgres({ dir, port: await freePort() });
    const pid = Number((await readFile(path.join(dir, "postmaster.pid"), "utf8")).split("\n")[0]);
    process.kill(pid, "SIGKILL");
    // Gone: its port no longer answers.
    const url = new URL(cluster.url);
    await expect
      .poll(
        () =>
          new Promise<boolean>((resolve) => {
            const socket = net.connect(Number(url.port), "127.0.0.1");
            socket.once("connect", () => resolve(socket.destroy() !== undefined));
            socket.once("error", () => resolve(false));
          }),
      )
      .toBe(false);
    // Asked to stop a while after (a launcher that notices, an operator's Ctrl-C): by then the
    // server's exit has been heard by the process that started it.
    await sleep(1_000);
    const stopped = await Promise.race([
      cluster.stop().then(() => "stopped"),
      sleep(10_000).then(() => "hung"),
    ]);
    expect(stopped).toBe("stopped");
  });
});
