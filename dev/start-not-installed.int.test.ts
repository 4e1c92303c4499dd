import { execFile } from "node:child_process";
import { cp, mkdir, mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";

const run = promisify(execFile);
const REPO_ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

// `npm start` in a checkout whose packages were never installed (the README's `npm ci` skipped)
// ended with "could not bundle the programs: Cannot find package 'esbuild' imported from …",
// which does not say what to run.
describe("npm start before npm ci", () => {
  let checkout = "";
  afterAll(async () => {
    if (checkout) await rm(checkout, { recursive: true, force: true });
  });

  it("says the packages are not installed and to run npm ci, exit 1, making nothing", async () => {
    // A checkout as git gives it: the launcher's files and package.json, no node_modules.
    checkout = await mkdtemp(path.join(tmpdir(), "agents-not-installed-"));
    for (const file of ["package.json", "dev/start.mjs", "ops/lib/program-bundles.mjs"]) {
      await mkdir(path.dirname(path.join(checkout, file)), { recursive: true });
      await cp(path.join(REPO_ROOT, file), path.join(checkout, file));
    }
    const ran = await run("npm", ["start"], { cwd: checkout, env: { PATH: process.env.PATH } }).then(
      () => ({ code: 0, stderr: "" }),
      (error: { code: number; stderr: string }) => ({ code: error.code, stderr: error.stderr }),
    );
    expect(ran.code).toBe(1);
    expect(ran.stderr).toContain(
      `[start] the packages are not installed in ${checkout} (node_modules has no esbuild or tsx): run npm ci there first, then npm start\n`,
    );
    expect((await readdir(checkout)).sort()).toEqual(["dev", "ops", "package.json"]);
  }, 60_000);
});
