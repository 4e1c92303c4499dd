/**
 * What the two offline key tools share (ops/enclave-authority.ts, ops/recovery-key.ts): a new key
 * written as hex to a 0600 file that is never overwritten (an enclave may already be sealed with
 * the key there), and the command line `--out PATH | --show PATH`, whose messages never carry a
 * key file's text.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { errorMessage } from "../../shared/error-message.ts";
import { toHex } from "../../shared/hex.ts";

/** Thrown when the key file already exists. */
export class KeyFileExistsError extends Error {
  override readonly name = "KeyFileExistsError";
}

/** Writes `key` as hex to a new file at `path` (0600, its folder 0700); refuses an existing file. */
export async function writeNewKeyFile(path: string, key: Uint8Array, what: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  try {
    await writeFile(path, `${toHex(key)}\n`, { mode: 0o600, flag: "wx" });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") {
      throw new KeyFileExistsError(`${path} exists; refusing to overwrite ${what}`);
    }
    throw error;
  }
}

export type KeyFileTool = {
  /** The tool's name in its messages and its path in the usage line. */
  name: string;
  path: string;
  /** What a file of this kind holds, for the message when it cannot be read. */
  holds: string;
  /** Creates a new key file at the path; what to print of it (public parts only). */
  create(path: string): Promise<Record<string, string>>;
  /** The public key of an existing key file. */
  show(path: string): Promise<string>;
};

/**
 * `--out PATH` creates a key file and prints its public parts as one JSON line; `--show PATH`
 * prints an existing file's public key alone on one line (for `$(...)` in the runbook). Exit 0,
 * 2 when the file exists or cannot be read, 64 on a usage error.
 */
export async function runKeyFileTool(tool: KeyFileTool, args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { out: { type: "string" }, show: { type: "string" } },
    strict: true,
  });
  if (values.show !== undefined && values.out === undefined) {
    try {
      process.stdout.write(`${await tool.show(values.show)}\n`);
      return 0;
    } catch (error) {
      // The path is the operator's own; the file's contents never appear in a message.
      const reason = error instanceof Error && "code" in error ? String(error.code) : `not ${tool.holds}`;
      process.stderr.write(`${tool.name}: cannot read ${values.show} (${reason})\n`);
      return 2;
    }
  }
  if (!values.out || values.show !== undefined) {
    process.stderr.write(`usage: npx tsx ${tool.path} --out PATH | --show PATH\n`);
    return 64;
  }
  try {
    process.stdout.write(`${JSON.stringify(await tool.create(values.out))}\n`);
    return 0;
  } catch (error) {
    if (!(error instanceof KeyFileExistsError)) throw error;
    process.stderr.write(`${error.message}\n`);
    return 2;
  }
}

/** Runs the tool when its module is the process's entry point (not when it is imported). */
export function runKeyFileToolIfMain(moduleUrl: string, tool: KeyFileTool): void {
  if (!process.argv[1] || resolve(process.argv[1]) !== fileURLToPath(moduleUrl)) return;
  runKeyFileTool(tool, process.argv.slice(2)).then(
    (code) => process.exit(code),
    (error: unknown) => {
      process.stderr.write(`${tool.name}: ${errorMessage(error)}\n`);
      process.exit(1);
    },
  );
}
