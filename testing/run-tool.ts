/**
 * Runs one of the repository's command-line tools (an operator tool, the CLI, a dev script) as a
 * child process until it exits, for tests of what it prints and the code it exits with.
 */
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { programArgs } from "../ops/lib/program-bundles.mjs";
import { REPO_ROOT } from "./enclave-process.ts";
import { recordSecretsOf } from "./secret-sink.ts";

export type RunToolOptions = {
  /** Added to this process's environment (or to PATH alone, with `cleanEnv`); `undefined` unsets. */
  env?: Record<string, string | undefined>;
  /** Start from PATH alone instead of this process's whole environment. */
  cleanEnv?: boolean;
  /** The working folder; the repository's root by default. */
  cwd?: string;
  /** Written to the tool's standard input, which is then closed; none by default. */
  stdin?: string;
  /** The tool is killed after this long and the run reports code -1. */
  timeoutMs?: number;
  /** Told of each piece of standard error as it arrives, for a test that watches a tool still running. */
  onStderr?: (text: string) => void;
  /** Told of each piece of standard output as it arrives. */
  onStdout?: (text: string) => void;
  /** Handed the child once spawned, for a test that signals it (Ctrl-C is SIGINT). */
  onSpawn?: (child: ChildProcess) => void;
};

/** `code` is the exit code, or -1 when the tool did not exit by itself (a signal, the timeout). */
export type ToolRun = { code: number; stdout: string; stderr: string };

/**
 * Runs `entry` (a path from the repository's root) with `args`: a TypeScript file through tsx,
 * anything else with node alone. tsx is loaded by its path, so any working folder will do.
 */
export function runTool(
  entry: string,
  args: readonly string[] = [],
  options: RunToolOptions = {},
): Promise<ToolRun> {
  const file = path.resolve(REPO_ROOT, entry);
  const program = file.endsWith(".ts") ? programArgs(file) : [file];
  const base = options.cleanEnv ? { PATH: process.env.PATH ?? "" } : process.env;
  const env = { ...base, ...options.env };
  // The secrets a test hands a tool are searched for in every log of the run (secret-sink.ts).
  recordSecretsOf(options.env ?? {});
  const child = spawn(process.execPath, [...program, ...args], {
    cwd: options.cwd ?? REPO_ROOT,
    env,
    stdio: [options.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    timeout: options.timeoutMs,
  });
  options.onSpawn?.(child);
  if (options.stdin !== undefined) child.stdin?.end(options.stdin);
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString();
    options.onStdout?.(chunk.toString());
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
    options.onStderr?.(chunk.toString());
  });
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (code) => resolve({ code: code ?? -1, stdout, stderr }));
  });
}
