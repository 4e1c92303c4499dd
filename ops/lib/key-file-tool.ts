/**
 * What the two offline key tools share (ops/enclave-authority.ts, ops/recovery-key.ts): a new key
 * written as hex to a 0600 file that is never overwritten (an enclave may already be sealed with
 * the key there), and the command line `--out PATH | --show PATH`, whose messages never carry a
 * key file's text.
 */
import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import { parseArgs } from "node:util";
import { toHex } from "../../shared/hex.ts";
import { type CliTool, DONE, readArgumentFile, refused, UsageError } from "./cli-shell.ts";
import { type NewFileDisk, nodeDisk, writeNewFileDurably } from "./new-file.ts";

/** Thrown when the key file already exists. */
export class KeyFileExistsError extends Error {
  override readonly name = "KeyFileExistsError";
}

/**
 * Writes `key` as hex to a new file at `path` (0600, its folder 0700), on disk before it resolves
 * (new-file.ts); refuses an existing file.
 */
export async function writeNewKeyFile(
  path: string,
  key: Uint8Array,
  what: string,
  disk: NewFileDisk = nodeDisk,
): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  try {
    await writeNewFileDurably(path, new TextEncoder().encode(`${toHex(key)}\n`), 0o600, disk);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "EEXIST") {
      throw new KeyFileExistsError(`${path} exists; refusing to overwrite ${what}`);
    }
    throw error;
  }
}

export type KeyFileTool = {
  /** The tool's name in its messages, and its npm script in the usage line. */
  name: string;
  /** What a file of this kind holds, for the message when it cannot be read. */
  holds: string;
  /** Creates a new key file at the path; what to print of it (public parts only). */
  create(path: string): Promise<Record<string, string>>;
  /** The public key of an existing key file. */
  show(path: string): Promise<string>;
};

/**
 * `--out PATH` creates a key file and prints its public parts as one JSON line; `--show PATH`
 * prints an existing file's public key alone on one line (for `$(...)` in the runbook). A file
 * that exists already is refused; one that cannot be read is a usage error.
 */
export function keyFileCli(tool: KeyFileTool): CliTool {
  return {
    name: tool.name,
    usage: `usage: npm run ${tool.name} -- --out PATH | --show PATH`,
    async run(argv) {
      const { values } = parseArgs({
        args: argv,
        options: { out: { type: "string" }, show: { type: "string" } },
        strict: true,
      });
      if (values.show !== undefined && values.out === undefined) {
        const shown = await readArgumentFile("--show", values.show, tool.holds, tool.show);
        process.stdout.write(`${shown}\n`);
        return DONE;
      }
      if (!values.out || values.show !== undefined) throw new UsageError("give --out PATH or --show PATH");
      try {
        process.stdout.write(`${JSON.stringify(await tool.create(values.out))}\n`);
        return DONE;
      } catch (error) {
        if (!(error instanceof KeyFileExistsError)) throw error;
        return refused(error.message);
      }
    },
  };
}
