/**
 * A private key file's text, read only when no one but its owner may read it (mode 0600, as the
 * tools write them and docs/operations.md installs them). A key that group or others may read has
 * been open to whoever else is on the host, so it is refused, as ssh refuses such a key, rather
 * than used silently. The error names the file, never its content.
 */
import { readFile, stat } from "node:fs/promises";

export async function readPrivateKeyFile(path: string): Promise<string> {
  if (((await stat(path)).mode & 0o077) !== 0) {
    // `code` is what the operator tools' usage error prints (ops/lib/cli-shell.ts readArgumentFile).
    throw Object.assign(new Error(`${path}: group or others may read this private key (chmod 600)`), {
      code: "group or others may read it: chmod 600",
    });
  }
  return readFile(path, "utf8");
}
