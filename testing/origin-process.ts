/**
 * Runs an origin as its own process (origin/main.ts, or a fault-injection child printing its base
 * URL first), for tests that kill it, restart it or run two at once on one database.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { programArgs } from "../ops/lib/program-bundles.mjs";
import { sleep } from "../shared/sleep.ts";
import { REPO_ROOT } from "./enclave-process.ts";
import type { HeldSocket } from "./held-socket.ts";
import { recordOutput, recordSecretsOf } from "./secret-sink.ts";

/** How much of an origin's output `output()` gives: the tail, where its last words are. */
const OUTPUT_KEPT = 65_536;

export type OriginProcess = {
  /** `http://127.0.0.1:<port>/77` */
  base: string;
  child: ChildProcess;
  output(): string;
  /** Resolves with the exit code or the signal that ended it. */
  exited: Promise<number | string>;
  /** SIGTERM and wait. */
  stop(): Promise<number | string>;
};

export async function spawnOrigin(params: {
  env: Record<string, string>;
  entry?: string;
  /** A fixed port: readiness is then /healthz answering, whatever the log level. */
  port?: number;
  /** Served instead of a port of its own: handed over as a supervisor does (LISTEN_FDS). */
  socket?: HeldSocket;
  /** Extra arguments for node itself (a profiler, say). */
  nodeArgs?: string[];
  timeoutMs?: number;
}): Promise<OriginProcess> {
  const { DATABASE_URL: _inherited, ...inherited } = process.env;
  recordSecretsOf(params.env);
  const port = params.socket?.port ?? params.port;
  const node = [
    process.execPath,
    ...(params.nodeArgs ?? []),
    ...programArgs(params.entry ?? "origin/main.ts"),
  ];
  const env = { ...inherited, ORIGIN_PORT: String(port ?? 0), LOG_LEVEL: "info", ...params.env };
  // LISTEN_PID must name the origin itself: the shell learns its own pid, then execs node in place.
  // The IPC channel is how the origin learns that this test's process is gone (killed with its
  // run, a Ctrl-C on npm test) before it stopped it: it stops too (shared/node/parent-exit.ts),
  // where it ran on as an orphan.
  const child = params.socket
    ? spawn("/bin/sh", ["-c", 'LISTEN_PID=$$ exec "$@"', "sh", ...node], {
        cwd: REPO_ROOT,
        env: { ...env, LISTEN_FDS: "1" },
        stdio: ["ignore", "pipe", "pipe", params.socket.fd, "ipc"],
      })
    : spawn(node[0]!, node.slice(1), { cwd: REPO_ROOT, env, stdio: ["ignore", "pipe", "pipe", "ipc"] });
  // Followed by the origin, not by this process: it keeps no test's process alive.
  child.channel?.unref();
  // The last 64 KiB of output: enough to find the URL or explain a failure, bounded under load.
  // Cut back to it only once it has grown to twice that: cutting on every chunk copied 64 KiB a
  // log line, about 0.3 s of the fuzz's test process for its origin's 23,000 chunks.
  let kept = "";
  const output = (): string => (kept.length > OUTPUT_KEPT ? kept.slice(-OUTPUT_KEPT) : kept);
  const keep = (chunk: Buffer): void => {
    const text = chunk.toString();
    kept += text;
    if (kept.length > 2 * OUTPUT_KEPT) kept = kept.slice(-OUTPUT_KEPT);
    recordOutput("origin process", text);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = new Promise<number | string>((resolve) =>
    child.once("exit", (code, signal) => resolve(code ?? signal ?? "unknown")),
  );
  const deadline = Date.now() + (params.timeoutMs ?? 60_000);
  let base: string;
  try {
    base = await listeningBase(child, output, port, deadline);
  } catch (error) {
    // An origin that never got ready must not outlive its test: it would hold its database and
    // its timers, and take CPU from every file after it, for the rest of the run.
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await exited;
    throw error;
  }
  return {
    base,
    child,
    output,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      return exited;
    },
  };
}

/** The origin's base URL once it answers (a fixed port) or logs where it listens. */
async function listeningBase(
  child: ChildProcess,
  output: () => string,
  port: number | undefined,
  deadline: number,
): Promise<string> {
  const fixed = port === undefined ? undefined : `http://127.0.0.1:${port}/77`;
  for (;;) {
    if (
      fixed &&
      // Bounded: on a held socket the probe waits in its queue while no origin accepts.
      (await fetch(`${fixed}/healthz`, { signal: AbortSignal.timeout(2_000) }).then(
        (r) => r.ok,
        () => false,
      ))
    )
      return fixed;
    // main.ts logs `{"msg":"origin listening","url":…}`; fault children print the URL alone.
    const listening =
      /"url":"(http:\/\/[^"]+)"[^\n]*"origin listening"|"msg":"origin listening"[^\n]*"url":"(http:\/\/[^"]+)"/.exec(
        output(),
      );
    const bare = /^(http:\/\/127\.0\.0\.1:\d+\/\S+)$/m.exec(output());
    const base = listening?.[1] ?? listening?.[2] ?? bare?.[1];
    if (base) return base;
    if (child.exitCode !== null || child.signalCode !== null)
      throw new Error(`origin exited before listening:\n${output()}`);
    if (Date.now() > deadline) throw new Error(`origin did not start in time:\n${output()}`);
    await sleep(50);
  }
}
