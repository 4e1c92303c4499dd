/**
 * Arguments of `npm run enclave` (serve, the default) and `npm run enclave -- init`. Flags win
 * over environment variables, which win over the built-in defaults.
 */
import { parseArgs } from "node:util";
import * as z from "zod";
import type { InitEnclaveParams } from "./init.ts";

export const DEFAULT_SOCKET_PATH = ".data/enclave.sock";
export const DEFAULT_DATA_DIR = ".data/enclave";

export type EnclaveCommand =
  | { command: "help" }
  | ({ command: "init" } & Omit<InitEnclaveParams, "chainId" | "now">)
  | {
      command: "serve";
      dataDir: string;
      socketPath: string;
      announcedProfile: string | undefined;
      logLevel: string;
      /** 0o600 (the default) or 0o660: the socket's group may connect too (a separate origin user). */
      socketMode: 0o600 | 0o660;
      /** ENCLAVE_VERIFY_STATE_JOURNAL=1 (tests): each state journal record is checked (state-store.ts). */
      verifyStateJournal: boolean;
      /**
       * --throwaway (the restore drill's enclave): the data folder, given by --data-dir, is deleted
       * when the process stops, its parent's exit included.
       */
      throwaway: boolean;
    };

const envSchema = z.object({
  ENCLAVE_SOCKET_PATH: z.string().min(1).optional(),
  ENCLAVE_DATA_DIR: z.string().min(1).optional(),
  ENCLAVE_ANNOUNCED_PROFILE: z.string().min(1).optional(),
  ENCLAVE_SOCKET_MODE: z.enum(["0600", "0660"]).optional(),
  ENCLAVE_VERIFY_STATE_JOURNAL: z.enum(["0", "1"]).optional(),
  LOG_LEVEL: z.string().min(1).optional(),
});

/** Thrown with a message fit for the terminal. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

export const USAGE = `usage:
  npm run enclave -- init --env-id ID --admin-pubkey HEX --policy-pubkey HEX --recovery-pubkey HEX
                          --recovery-enc-pubkey HEX [--data-dir DIR]
  npm run enclave [-- serve] [--socket PATH] [--data-dir DIR] [--socket-mode 0600|0660] [--throwaway]
env: ENCLAVE_SOCKET_PATH (default ${DEFAULT_SOCKET_PATH}), ENCLAVE_DATA_DIR (default ${DEFAULT_DATA_DIR}),
     ENCLAVE_SOCKET_MODE (default 0600; 0660 lets the socket's group, the origin's user, connect),
     ENCLAVE_ANNOUNCED_PROFILE / --profile and ENCLAVE_VERIFY_STATE_JOURNAL=1 (tests only), LOG_LEVEL;
     --throwaway (the restore drill's) deletes the --data-dir folder when the enclave stops`;

/** Parses argv (without node and script) and the environment into a command. */
export function parseEnclaveArgs(argv: string[], env: Record<string, string | undefined>): EnclaveCommand {
  const envParsed = envSchema.safeParse(env);
  if (!envParsed.success) throw new UsageError("invalid ENCLAVE_* environment variable");
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      "env-id": { type: "string" },
      "admin-pubkey": { type: "string" },
      "policy-pubkey": { type: "string" },
      "recovery-pubkey": { type: "string" },
      "recovery-enc-pubkey": { type: "string" },
      "data-dir": { type: "string" },
      socket: { type: "string" },
      "socket-mode": { type: "string" },
      profile: { type: "string" },
      throwaway: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  // As every operator tool takes it (docs/operations.md#exit-codes-of-the-operator-tools).
  if (values.help) return { command: "help" };
  const command = positionals[0] ?? "serve";
  const dataDir = values["data-dir"] ?? envParsed.data.ENCLAVE_DATA_DIR ?? DEFAULT_DATA_DIR;
  const throwaway = values.throwaway ?? false;
  // Only a folder named on this command line is ever deleted: never the default, nor the variable's.
  if (throwaway && (command !== "serve" || values["data-dir"] === undefined)) {
    throw new UsageError("--throwaway serves with --data-dir DIR, the folder it deletes when it stops");
  }
  if (command === "init") {
    const envId = values["env-id"];
    const adminAuthority = values["admin-pubkey"];
    const policyAuthority = values["policy-pubkey"];
    const recoveryAuthority = values["recovery-pubkey"];
    const recoveryEncryptionKey = values["recovery-enc-pubkey"];
    if (!envId || !adminAuthority || !policyAuthority || !recoveryAuthority || !recoveryEncryptionKey) {
      throw new UsageError(
        "init needs --env-id, --admin-pubkey, --policy-pubkey, --recovery-pubkey and --recovery-enc-pubkey",
      );
    }
    return {
      command: "init",
      dataDir,
      envId,
      adminAuthority,
      policyAuthority,
      recoveryAuthority,
      recoveryEncryptionKey,
    };
  }
  if (command === "serve") {
    const mode = values["socket-mode"] ?? envParsed.data.ENCLAVE_SOCKET_MODE ?? "0600";
    if (mode !== "0600" && mode !== "0660") throw new UsageError("--socket-mode must be 0600 or 0660");
    return {
      command: "serve",
      dataDir,
      socketPath: values.socket ?? envParsed.data.ENCLAVE_SOCKET_PATH ?? DEFAULT_SOCKET_PATH,
      announcedProfile: values.profile ?? envParsed.data.ENCLAVE_ANNOUNCED_PROFILE,
      logLevel: envParsed.data.LOG_LEVEL ?? "info",
      socketMode: mode === "0660" ? 0o660 : 0o600,
      verifyStateJournal: envParsed.data.ENCLAVE_VERIFY_STATE_JOURNAL === "1",
      throwaway,
    };
  }
  throw new UsageError(`unknown command ${command}`);
}
