/**
 * Resident memory of processes, from /proc (Linux): how the soak watches each part of the stack
 * for growth. A single process is measured by its RSS; a tree (Postgres serves each connection in
 * a child process that maps the same shared buffers) by the sum of its processes' PSS, which
 * counts each shared page once, split among the processes that map it.
 */
import { readdir, readFile } from "node:fs/promises";

/** A process to measure: alone (its RSS), or with its descendants (the sum of their PSS). */
export type MemoryRoot = { pid: number | undefined; tree: boolean };

/** Bytes of one `Name:   123 kB` line of a /proc status or smaps_rollup file; undefined if absent. */
function kilobytesField(text: string, name: string): number | undefined {
  const match = new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(text);
  return match ? Number(match[1]) * 1024 : undefined;
}

/** Bytes resident in one process (its VmRSS); undefined once it has ended. */
export async function rssBytes(pid: number): Promise<number | undefined> {
  try {
    return kilobytesField(await readFile(`/proc/${pid}/status`, "utf8"), "VmRSS");
  } catch {
    return undefined;
  }
}

async function pssBytes(pid: number): Promise<number> {
  try {
    return kilobytesField(await readFile(`/proc/${pid}/smaps_rollup`, "utf8"), "Pss") ?? 0;
  } catch {
    return 0; // the process ended while we read, or its memory map is not ours to read
  }
}

async function childrenByParent(): Promise<Map<number, number[]>> {
  const children = new Map<number, number[]>();
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const text = await readFile(`/proc/${entry}/stat`, "utf8");
      // The command name may hold spaces and parentheses: fields start after the last ")".
      const ppid = Number(text.slice(text.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // The process ended while we read.
    }
  }
  return children;
}

/** Bytes resident per named root now; undefined for a root that is not running. */
export async function residentBytes(
  roots: Record<string, MemoryRoot>,
): Promise<Record<string, number | undefined>> {
  const needsTree = Object.values(roots).some((root) => root.tree);
  const children = needsTree ? await childrenByParent() : new Map<number, number[]>();
  const out: Record<string, number | undefined> = {};
  for (const [name, root] of Object.entries(roots)) {
    if (root.pid === undefined) {
      out[name] = undefined;
    } else if (!root.tree) {
      out[name] = await rssBytes(root.pid);
    } else {
      let total = 0;
      const queue = [root.pid];
      while (queue.length > 0) {
        const pid = queue.pop()!;
        total += await pssBytes(pid);
        queue.push(...(children.get(pid) ?? []));
      }
      out[name] = total > 0 ? total : undefined;
    }
  }
  return out;
}

/** The pids of this process's children whose command name contains `name` (e.g. Miniflare's workerd). */
export async function childPidsNamed(name: string, parent = process.pid): Promise<number[]> {
  const found: number[] = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const text = await readFile(`/proc/${entry}/stat`, "utf8");
      const comm = text.slice(text.indexOf("(") + 1, text.lastIndexOf(")"));
      const ppid = Number(text.slice(text.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === parent && comm.includes(name)) found.push(Number(entry));
    } catch {
      // The process ended while we read.
    }
  }
  return found;
}
