/**
 * Runs the real enclave program (`enclave/main.ts`, its bundle while current) on a temporary socket
 * and data directory, so the enclave's tests run the program itself, and as the benchmark uses it.
 */
import { type ChildProcess, type StdioOptions, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { initEnclave } from "../enclave/init.ts";
import { socketAccepts } from "../enclave/socket-probe.ts";
import { programArgs } from "../ops/lib/program-bundles.mjs";
import { authorityPublicKey, randomAuthoritySecret } from "../shared/capability.ts";
import { toHex } from "../shared/hex.ts";
import { randomX25519PrivateKey, x25519PublicKey } from "../shared/recovery-envelope.ts";
import { sleep } from "../shared/sleep.ts";
import { recordOutput, recordSecret } from "./secret-sink.ts";

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const MAIN = join(REPO_ROOT, "enclave/main.ts");

export type EnclaveFixture = {
  dir: string;
  dataDir: string;
  socketPath: string;
  envId: string;
  adminSecret: Uint8Array;
  /** The policy authority (configure_policy, configure_treasury): never the origin's key. */
  policySecret: Uint8Array;
  recoverySecret: Uint8Array;
  /** The offline recovery encryption key (X25519 private key) every backup is sealed to. */
  recoveryEncKey: Uint8Array;
  /** Starts the process (again); resolves when the socket accepts connections. */
  start: (options?: { profile?: string }) => Promise<void>;
  /** Sends SIGTERM and waits for the exit; resolves with the exit code. */
  stop: () => Promise<number | null>;
  /** SIGKILLs the process (no shutdown of its own) and waits until it is gone; start() runs it again. */
  kill: () => Promise<void>;
  /** Stops the process and removes the temporary directory. */
  dispose: () => Promise<void>;
  stderr: () => string;
  /** The running process's pid (tests pause it with SIGSTOP to produce a real timeout). */
  pid: () => number | undefined;
};

/** What most tests want: an initialised enclave, already serving. */
export type EnclaveProcess = EnclaveFixture;

export function startEnclaveProcess(
  options: { envId?: string; nodeArgs?: string[] } = {},
): Promise<EnclaveProcess> {
  return createEnclaveFixture({ ...options, start: true });
}

/** The offline keys of a fixture; pass another fixture's to initialise a second enclave like it. */
export type FixtureKeys = Pick<
  EnclaveFixture,
  "adminSecret" | "policySecret" | "recoverySecret" | "recoveryEncKey"
>;

/** Creates a temporary data dir, initialises it as `enclave init` does and starts the enclave. */
export async function createEnclaveFixture(
  options: {
    envId?: string;
    start?: boolean;
    keys?: FixtureKeys;
    logLevel?: string;
    /** Node options for the serving process (the benchmark's profiling: `--cpu-prof`). */
    nodeArgs?: string[];
  } = {},
): Promise<EnclaveFixture> {
  const dir = await mkdtemp(join(tmpdir(), "enclave-"));
  const dataDir = join(dir, "data");
  const socketPath = join(dir, "enclave.sock");
  const envId = options.envId ?? "test-env";
  const adminSecret = options.keys?.adminSecret ?? randomAuthoritySecret();
  const policySecret = options.keys?.policySecret ?? randomAuthoritySecret();
  const recoverySecret = options.keys?.recoverySecret ?? randomAuthoritySecret();
  const recoveryEncKey = options.keys?.recoveryEncKey ?? randomX25519PrivateKey();
  // The authorities' and the recovery key's private halves must never show in any output either.
  for (const key of [adminSecret, policySecret, recoverySecret, recoveryEncKey])
    recordSecret(toHex(key).replace(/^0x/, ""));
  // `init` through the enclave's own code in this process, where the CLI cost a process start of
  // about half a second of CPU for a few milliseconds of work, at every fixture of the suite (the
  // CLI's `init` keeps tests of its own: ops/recover, the restore drill, npm start's).
  await initEnclave({
    dataDir,
    envId,
    adminAuthority: authorityPublicKey(adminSecret),
    policyAuthority: authorityPublicKey(policySecret),
    recoveryAuthority: authorityPublicKey(recoverySecret),
    recoveryEncryptionKey: toHex(x25519PublicKey(recoveryEncKey)),
  });

  let child: ChildProcess | null = null;
  let stderr = "";
  const end = async (signal: "SIGTERM" | "SIGKILL"): Promise<number | null> => {
    const current = child;
    child = null;
    // A process killed by a signal keeps exitCode null: signalCode says it is gone already.
    if (!current || current.exitCode !== null || current.signalCode !== null)
      return current?.exitCode ?? null;
    const exited = new Promise<number | null>((done) => current.once("exit", (code) => done(code)));
    current.kill(signal);
    return exited;
  };
  const stop = (): Promise<number | null> => end("SIGTERM");
  const start = async (startOptions: { profile?: string } = {}): Promise<void> => {
    await stop();
    const args = [
      ...(options.nodeArgs ?? []),
      ...programArgs(MAIN),
      "serve",
      "--socket",
      socketPath,
      "--data-dir",
      dataDir,
    ];
    if (startOptions.profile) args.push("--profile", startOptions.profile);
    const spawned = spawn(process.execPath, args, {
      cwd: REPO_ROOT,
      // The IPC channel is how the enclave learns that this test's process is gone (killed with
      // its run, a Ctrl-C on npm test) before its afterAll stopped it: it stops too
      // (shared/node/parent-exit.ts), where it ran on as an orphan beside its keys.
      stdio: ["ignore", "ignore", "pipe", "ipc"],
      env: { ...process.env, LOG_LEVEL: options.logLevel ?? "warn" },
    });
    // Followed by the enclave, not by this process: it keeps no test's process alive.
    spawned.channel?.unref();
    spawned.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8");
      recordOutput("enclave", chunk.toString("utf8"));
    });
    child = spawned;
    await waitForSocket(socketPath, spawned);
  };
  const fixture: EnclaveFixture = {
    dir,
    dataDir,
    socketPath,
    envId,
    adminSecret,
    policySecret,
    recoverySecret,
    recoveryEncKey,
    start,
    stop,
    kill: async () => {
      await end("SIGKILL");
    },
    dispose: async () => {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
    stderr: () => stderr,
    pid: () => child?.pid,
  };
  if (options.start !== false) await start();
  return fixture;
}

/** An enclave serving a fixture's folder as a test spawned it, and how it ended. */
export type ServingEnclave = { child: ChildProcess; exited: Promise<number | string> };

/**
 * Serves `fixture`'s folder from a process the test owns (its stdio, an IPC channel, `--throwaway`),
 * for tests of how the program meets its surroundings: its output's reader gone, its parent gone.
 * `exited` is the exit code, or the signal that ended it. Set `listening` to wait for its socket.
 */
export async function serveEnclave(
  fixture: Pick<EnclaveFixture, "socketPath" | "dataDir">,
  options: { stdio: StdioOptions; args?: string[]; env?: NodeJS.ProcessEnv; listening?: boolean },
): Promise<ServingEnclave> {
  const child = spawn(
    process.execPath,
    [
      ...programArgs(MAIN),
      "serve",
      "--socket",
      fixture.socketPath,
      "--data-dir",
      fixture.dataDir,
      ...(options.args ?? []),
    ],
    { cwd: REPO_ROOT, stdio: options.stdio, env: options.env ?? process.env },
  );
  const exited = new Promise<number | string>((done) =>
    child.once("exit", (code, signal) => done(code ?? signal ?? "unknown")),
  );
  if (options.listening) await waitForSocket(fixture.socketPath, child);
  return { child, exited };
}

async function waitForSocket(socketPath: string, child: ChildProcess, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`enclave exited with code ${child.exitCode}`);
    if (await socketAccepts(socketPath)) return;
    await sleep(50);
  }
  throw new Error("enclave did not start listening in time");
}
