/**
 * What a launcher killed outright (kill -9, the OOM killer, a crash) leaves running: the embedded
 * Postgres and the edge's workerd, which cannot see their launcher die. The devnet, the enclave and
 * the origin leave with it (their IPC channel closes). Each launcher records its own in
 * `<dataDir>/launcher.json`; the next start on the folder stops them once the launcher that
 * recorded them is gone, so a killed start costs the next one nothing. Only a process whose command
 * line is still the one recorded is stopped (a pid the system gave to another program is left
 * alone), and only where /proc shows it: elsewhere the launcher's message names the pid to stop.
 */
import { readdir, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { sleep } from "../shared/sleep.ts";

export type LauncherRecord = {
  launcher: number;
  /** The postmaster of the folder's cluster, once started. */
  postgres?: number;
  /** The edge's workerd processes, once started. */
  workerd: number[];
};

const RECORD_FILE = "launcher.json";
/** How long a leftover Postgres gets for its fast shutdown before it is killed. */
const POSTGRES_STOP_MS = 30_000;

const recordPath = (dataDir: string): string => path.join(dataDir, RECORD_FILE);

export async function recordLauncher(dataDir: string, record: LauncherRecord): Promise<void> {
  await writeFile(recordPath(dataDir), `${JSON.stringify(record)}\n`, { mode: 0o600 });
}

/** A clean stop: nothing is left for the next start. */
export async function forgetLauncher(dataDir: string): Promise<void> {
  await rm(recordPath(dataDir), { force: true });
}

/**
 * Stops what the folder's last launcher left running, when that launcher is gone: its Postgres
 * (a fast shutdown, as Ctrl-C's stop) and its workerd. Says what it stopped.
 */
export async function stopLeftovers(dataDir: string, say: (line: string) => void): Promise<void> {
  const record = await readRecord(dataDir);
  if (!record || alive(record.launcher)) return;
  const pgDir = path.join(dataDir, "pg");
  for (const pid of record.workerd) {
    if (!(await commandOf(pid))?.includes("workerd")) continue;
    signal(pid, "SIGKILL");
    say(`stopped the edge's workerd (pid ${pid}) that a start killed outright left running`);
  }
  const postgres = record.postgres;
  if (postgres !== undefined && (await commandOf(postgres))?.includes(pgDir)) {
    signal(postgres, "SIGINT");
    const deadline = Date.now() + POSTGRES_STOP_MS;
    while (alive(postgres) && Date.now() < deadline) await sleep(100);
    if (alive(postgres)) signal(postgres, "SIGKILL");
    say(`stopped the embedded Postgres (pid ${postgres}) that a start killed outright left running`);
  }
  await forgetLauncher(dataDir);
}

/** The workerd processes `parent` started (Miniflare's), from /proc; none where there is no /proc. */
export async function workerdChildren(parent: number = process.pid): Promise<number[]> {
  const entries = await readdir("/proc").catch(() => [] as string[]);
  const found: number[] = [];
  for (const entry of entries) {
    if (!/^[0-9]+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
    // `pid (comm) state ppid …`: comm may hold spaces, so read after its closing parenthesis.
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    if (comm === "workerd" && ppid === parent) found.push(Number(entry));
  }
  return found;
}

async function readRecord(dataDir: string): Promise<LauncherRecord | undefined> {
  try {
    const record = JSON.parse(await readFile(recordPath(dataDir), "utf8")) as LauncherRecord;
    return Number.isInteger(record.launcher) && Array.isArray(record.workerd) ? record : undefined;
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists, under another user.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** The process's command line, or undefined when it is gone or there is no /proc to read it from. */
async function commandOf(pid: number): Promise<string | undefined> {
  const raw = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => undefined);
  return raw?.replaceAll("\0", " ");
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Gone in between.
  }
}
