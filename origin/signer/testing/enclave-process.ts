/**
 * Runs the real enclave program for the signer client's integration tests. It launches
 * `enclave/main.ts` as a separate process through its CLI, exactly as an operator would, so the
 * origin still imports nothing from `enclave/` (DESIGN §2).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { authorityPublicKey, randomAuthoritySecret } from "../../../shared/capability.ts";

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
const ENCLAVE_MAIN = join(REPO_ROOT, "enclave/main.ts");
const run = promisify(execFile);

export type EnclaveProcess = {
  dir: string;
  socketPath: string;
  envId: string;
  adminSecret: Uint8Array;
  recoverySecret: Uint8Array;
  pid: () => number | undefined;
  start: (options?: { profile?: string }) => Promise<void>;
  stop: () => Promise<void>;
  dispose: () => Promise<void>;
};

/** Initialises a temporary enclave through `enclave/main.ts init` and starts serving. */
export async function startEnclaveProcess(options: { envId?: string } = {}): Promise<EnclaveProcess> {
  const dir = await mkdtemp(join(tmpdir(), "signer-client-"));
  const dataDir = join(dir, "data");
  const socketPath = join(dir, "enclave.sock");
  const envId = options.envId ?? "client-env";
  const adminSecret = randomAuthoritySecret();
  const recoverySecret = randomAuthoritySecret();
  await run(
    process.execPath,
    ["--import", "tsx", ENCLAVE_MAIN, "init", "--env-id", envId, "--data-dir", dataDir].concat([
      "--admin-pubkey",
      authorityPublicKey(adminSecret),
      "--recovery-pubkey",
      authorityPublicKey(recoverySecret),
    ]),
    { cwd: REPO_ROOT },
  );
  let child: ChildProcess | null = null;
  const stop = async (): Promise<void> => {
    const current = child;
    child = null;
    if (!current || current.exitCode !== null) return;
    const exited = new Promise((done) => current.once("exit", done));
    current.kill("SIGTERM");
    await exited;
  };
  const start = async (startOptions: { profile?: string } = {}): Promise<void> => {
    await stop();
    const args = ["--import", "tsx", ENCLAVE_MAIN, "serve", "--socket", socketPath, "--data-dir", dataDir];
    if (startOptions.profile) args.push("--profile", startOptions.profile);
    const spawned = spawn(process.execPath, args, {
      cwd: REPO_ROOT,
      stdio: "ignore",
      env: { ...process.env, LOG_LEVEL: "warn" },
    });
    child = spawned;
    await waitForSocket(socketPath, spawned);
  };
  await start();
  return {
    dir,
    socketPath,
    envId,
    adminSecret,
    recoverySecret,
    pid: () => child?.pid,
    start,
    stop,
    dispose: async () => {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

async function waitForSocket(socketPath: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`enclave exited with code ${child.exitCode}`);
    const up = await new Promise<boolean>((done) => {
      const probe = connect(socketPath);
      probe.once("connect", () => {
        probe.destroy();
        done(true);
      });
      probe.once("error", () => done(false));
    });
    if (up) return;
    await new Promise((done) => setTimeout(done, 50));
  }
  throw new Error("enclave did not start listening in time");
}
