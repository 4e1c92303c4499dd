import { type ChildProcess, spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { sleep } from "../../shared/sleep.ts";
import { programArgs } from "./program-bundles.mjs";

export type ManagedChild = {
  name: string;
  process: ChildProcess;
  /** Resolves with the exit code (or the signal name) once the process has gone. */
  exited: Promise<number | string>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when the process is gone. */
  stop(graceMs?: number): Promise<void>;
};

export type StartChildParams = {
  name: string;
  /** A TypeScript entry point, run from its bundle while current, else through tsx (program-bundles.mjs). */
  entry: string;
  /** The node arguments that run the program instead (a build of `entry`, say). */
  program?: readonly string[];
  args?: string[];
  env?: NodeJS.ProcessEnv;
  /** Receives every output line, already prefixed with the child's name. */
  onLine?: (line: string) => void;
};

/**
 * With BENCH_CPU_PROF=<dir> set, the node options that make a process write a V8 CPU profile into
 * that folder when it exits; otherwise none. For the benchmarks' children (docs/development.md).
 */
export function cpuProfileArgs(): string[] {
  const dir = process.env.BENCH_CPU_PROF;
  return dir ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : [];
}

/**
 * The node arguments that run `entry` as startChild does, profiled (cpuProfileArgs) when
 * BENCH_CPU_PROF is set; otherwise nothing, and startChild runs `entry` as usual.
 */
export function profiledProgram(entry: string): { program?: string[] } {
  const profile = cpuProfileArgs();
  return profile.length > 0 ? { program: [...profile, ...programArgs(entry)] } : {};
}

/**
 * Runs one part of the local stack as a child process. Each child gets its own process group
 * (so a terminal's Ctrl-C reaches only the launcher, which then stops the parts in order) and an
 * IPC channel (so a child whose launcher dies notices the disconnect and exits: no orphans).
 */
export function startChild(params: StartChildParams): ManagedChild {
  const program = params.program ?? programArgs(params.entry);
  const child = spawn(process.execPath, [...program, ...(params.args ?? [])], {
    env: params.env ?? process.env,
    stdio: ["ignore", "pipe", "pipe", "ipc"],
    detached: true,
  });
  const onLine = params.onLine ?? ((line: string) => process.stdout.write(`${line}\n`));
  for (const stream of [child.stdout, child.stderr]) {
    if (stream) createInterface({ input: stream }).on("line", (line) => onLine(`[${params.name}] ${line}`));
  }
  const exited = new Promise<number | string>((resolve) => {
    child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown"));
  });
  return {
    name: params.name,
    process: child,
    exited,
    async stop(graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Polls `probe` until it resolves true, the child exits, or `timeoutMs` passes. */
export async function waitUntilReady(
  child: ManagedChild,
  probe: () => Promise<boolean>,
  timeoutMs = 60_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let gone = false;
  void child.exited.then(() => {
    gone = true;
  });
  while (Date.now() < deadline) {
    if (gone) throw new Error(`${child.name} exited before it was ready`);
    if (await probe().catch(() => false)) return;
    await sleep(200);
  }
  throw new Error(`${child.name} was not ready within ${Math.round(timeoutMs / 1000)} s`);
}

export async function httpOk(url: string, init?: RequestInit): Promise<boolean> {
  const response = await fetch(url, { ...init, signal: AbortSignal.timeout(2_000) });
  await response.body?.cancel();
  return response.ok;
}
