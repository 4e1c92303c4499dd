/**
 * A throwaway enclave for the restore drill (docs/operations.md, "Restore drills"): the real enclave program,
 * initialised on a fresh temporary data folder with the env id, chain and public keys of the live enclave
 * (its sealed identity, nothing secret) and served on a socket inside that folder. It shares nothing
 * with the live enclave: not its sealing key, not its keystore, not its counters, not its instance
 * id (so no capability minted for it is good in the live one, nor the other way round). `close`
 * stops the process and deletes the folder, restored key sets and all, with the recovery key it
 * may hold in memory; it runs whatever happened before.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { socketAccepts } from "../../enclave/socket-probe.ts";
import { createSocketSignerClient } from "../../origin/signer/socket-client.ts";
import type { SealedIdentity, SignerClient } from "../../origin/signer/types.ts";
import { sleep } from "../../shared/sleep.ts";
import { programArgs } from "./program-bundles.mjs";
import { type ManagedChild, startChild } from "./supervisor.ts";

const run = promisify(execFile);

/**
 * The variables the throwaway enclave is run with: what node needs to run a program, and the
 * enclave's own log and journal switches. The drill runs with the node's configuration (the
 * database URL and its password, the node's secrets), none of which the enclave needs: passed on
 * as they are, they would sit in a second process's environment, readable as long as it runs.
 */
const ENCLAVE_ENV_NAMES = [
  "PATH",
  "HOME",
  "TMPDIR",
  "LANG",
  "TZ",
  "NODE_OPTIONS",
  "LOG_LEVEL",
  "ENCLAVE_VERIFY_STATE_JOURNAL",
];

function enclaveEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  return Object.fromEntries(
    ENCLAVE_ENV_NAMES.flatMap((name) => (env[name] === undefined ? [] : [[name, env[name]]])),
  );
}

export type ThrowawayEnclave = {
  /** The temporary folder holding its data folder and socket (gone after close). */
  dir: string;
  socketPath: string;
  signer: SignerClient;
  /** Its own sealed identity: the live enclave's env, chain and public keys, its own instance id. */
  identity: SealedIdentity;
  /** Stops the process, closes the client and deletes the folder. Safe to call twice. */
  close(): Promise<void>;
};

export type StartThrowawayEnclaveParams = {
  identity: SealedIdentity;
  /** Receives the throwaway enclave's log lines (JSON, as the enclave writes them). */
  onLog?: (line: string) => void;
  /** The node arguments that run the enclave program: by default its bundle while current, else tsx. */
  program?: readonly string[];
};

/** Initialises and starts a throwaway enclave; on any failure nothing is left behind. */
export async function startThrowawayEnclave(params: StartThrowawayEnclaveParams): Promise<ThrowawayEnclave> {
  const dir = await mkdtemp(join(tmpdir(), "restore-drill-"));
  // The folder is the enclave's data folder, its socket inside: served --throwaway, the enclave
  // deletes all of it when it stops, also when this process is killed before its own close
  // (its IPC channel then ends, docs/operations.md#restore-drills).
  const dataDir = dir;
  const socketPath = join(dir, "enclave.sock");
  let child: ManagedChild | undefined;
  let signer: SignerClient | undefined;
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closed ??= (async () => {
      await signer?.close().catch(() => {});
      await child?.stop(5_000);
      await rm(dir, { recursive: true, force: true });
    })();
    return closed;
  };
  try {
    const { identity } = params;
    const program = params.program ?? programArgs("enclave/main.ts");
    const env = enclaveEnvironment(process.env);
    await run(
      process.execPath,
      [
        ...program,
        "init",
        "--data-dir",
        dataDir,
        "--env-id",
        identity.envId,
        "--admin-pubkey",
        identity.adminAuthority,
        "--policy-pubkey",
        identity.policyAuthority,
        "--recovery-pubkey",
        identity.recoveryAuthority,
        "--recovery-enc-pubkey",
        identity.recoveryEncryptionKey,
      ],
      { env },
    );
    child = startChild({
      name: "drill-enclave",
      entry: "enclave/main.ts",
      program,
      args: ["serve", "--socket", socketPath, "--data-dir", dataDir, "--throwaway"],
      env,
      onLine: params.onLog ?? (() => {}),
    });
    await waitForSocket(socketPath, child);
    signer = createSocketSignerClient({ socketPath });
    const sealed = await signer.getSealedIdentity();
    const same =
      sealed.ok &&
      sealed.value.envId === identity.envId &&
      sealed.value.chainId === identity.chainId &&
      sealed.value.recoveryAuthority === identity.recoveryAuthority &&
      sealed.value.recoveryEncryptionKey === identity.recoveryEncryptionKey;
    if (!sealed.ok || !same)
      throw new Error("the throwaway enclave does not report the live enclave's identity");
    return { dir, socketPath, signer, identity: sealed.value, close };
  } catch (error) {
    await close();
    throw error;
  }
}

async function waitForSocket(socketPath: string, child: ManagedChild, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let exited = false;
  void child.exited.then(() => {
    exited = true;
  });
  while (Date.now() < deadline) {
    if (exited) throw new Error("the throwaway enclave exited before it listened");
    if (await socketAccepts(socketPath)) return;
    await sleep(50);
  }
  throw new Error("the throwaway enclave did not listen in time");
}
