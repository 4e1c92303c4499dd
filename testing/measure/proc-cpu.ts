/**
 * CPU time of process trees, from /proc (Linux): how benchmarks say which process spent what.
 * A tree is a process and all its descendants (Postgres serves each connection in a child).
 */
import { readdir, readFile } from "node:fs/promises";

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ; 100 on Linux). */
const TICKS_PER_SECOND = 100;

/** `reapedTicks`: the user plus system ticks of its children that ended and were waited for. */
type Stat = { ppid: number; ticks: number; reapedTicks: number };

/** Parent and user plus system ticks of a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat text. */
function parseStat(text: string): Stat {
  // The command name may hold spaces and parentheses: fields start after the last ")".
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return {
    ppid: Number(fields[1]),
    ticks: Number(fields[11]) + Number(fields[12]),
    reapedTicks: Number(fields[13]) + Number(fields[14]),
  };
}

async function readStats(): Promise<Map<number, Stat>> {
  const stats = new Map<number, Stat>();
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      stats.set(Number(entry), parseStat(await readFile(`/proc/${entry}/stat`, "utf8")));
    } catch {
      // The process ended while we read.
    }
  }
  return stats;
}

/**
 * CPU ms used so far by one process (/proc/<pid>/stat) or one of its threads
 * (/proc/<pid>/task/<tid>/stat); NaN where it cannot be read.
 */
export async function cpuMsOf(statPath: string): Promise<number> {
  try {
    return (parseStat(await readFile(statPath, "utf8")).ticks * 1000) / TICKS_PER_SECOND;
  } catch {
    return Number.NaN;
  }
}

/**
 * CPU ms used so far by a process's main thread (its event loop, for Node), NaN where it cannot be
 * read or there is no process.
 */
export function mainThreadCpuMs(pid: number | undefined): Promise<number> {
  return pid === undefined ? Promise.resolve(Number.NaN) : cpuMsOf(`/proc/${pid}/task/${pid}/stat`);
}

/**
 * A process to account for: with its descendants (`tree`), or alone. `reaped`: also the CPU of
 * descendants that have ended (Postgres ends a connection's process when the connection closes,
 * and its CPU would otherwise leave the tree's sum).
 */
export type CpuRoot = { pid: number | undefined; tree: boolean; reaped?: boolean };

/** CPU seconds used so far by each named tree (user plus system time; ended children not counted). */
export async function treeCpuSeconds(roots: Record<string, CpuRoot>): Promise<Record<string, number>> {
  const stats = await readStats();
  const children = new Map<number, number[]>();
  for (const [pid, stat] of stats) children.set(stat.ppid, [...(children.get(stat.ppid) ?? []), pid]);
  const out: Record<string, number> = {};
  for (const [name, root] of Object.entries(roots)) {
    let ticks = 0;
    const queue = root.pid === undefined ? [] : [root.pid];
    while (queue.length > 0) {
      const pid = queue.pop()!;
      const stat = stats.get(pid);
      ticks += (stat?.ticks ?? 0) + (root.reaped ? (stat?.reapedTicks ?? 0) : 0);
      if (root.tree) queue.push(...(children.get(pid) ?? []));
    }
    out[name] = ticks / TICKS_PER_SECOND;
  }
  return out;
}

/** Per-tree CPU seconds spent between two readings. */
export function cpuDelta(
  before: Record<string, number>,
  after: Record<string, number>,
): Record<string, number> {
  return Object.fromEntries(
    Object.entries(after).map(([name, seconds]) => [name, seconds - (before[name] ?? 0)]),
  );
}
