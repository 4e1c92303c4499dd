import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);
const REPO_ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

// The second stack of docs/operations.md#ports-and-their-variables (`START_DATA_DIR=.data2 … npm
// start`) made .data2/ in the checkout, which git listed as untracked: its authority, recovery and
// operator keys and local-secrets.json one `git add -A` away from a commit.
describe("the local stack's data folders in the checkout", () => {
  it.each([".data", ".data2"])("git ignores %s/ and the keys and secrets in it", async (folder) => {
    const files = ["admin-authority.key", "recovery-encryption.key", "local-secrets.json", "pg/PG_VERSION"];
    const paths = files.map((file) => `${folder}/${file}`);
    // check-ignore prints each path git ignores, and exits 1 when it ignores none.
    const ignored = await run("git", ["check-ignore", "--no-index", ...paths], { cwd: REPO_ROOT }).then(
      ({ stdout }) => stdout.trim().split("\n"),
      () => [],
    );
    expect(ignored).toEqual(paths);
  });
});
