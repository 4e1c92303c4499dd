import { execFile } from "node:child_process";
import { existsSync, realpathSync } from "node:fs";
import { mkdir, mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { runTool } from "../../testing/run-tool.ts";
import { buildStalePrograms, currentBundle, PROGRAMS, programArgs, REPO_ROOT } from "./program-bundles.mjs";

const run = promisify(execFile);

describe("the programs' bundles (program-bundles.mjs)", () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
  });
  afterAll(async () => {
    await db?.drop();
  });

  it("runs every program from its bundle, current with these sources once the suite's setup ran", () => {
    const newest = realpathSync(path.join(REPO_ROOT, "dist/programs"));
    for (const entry of PROGRAMS)
      expect(programArgs(entry)).toEqual([path.join(newest, entry.replace(/\.ts$/, ".mjs"))]);
  });

  it("a bundled tool reads the files beside its sources: migrate finds the migrations and the database up to date", async () => {
    expect(programArgs("ops/migrate.ts")).toEqual([currentBundle("ops/migrate.ts")]);
    const tool = await runTool("ops/migrate.ts", [], { env: { DATABASE_URL: db.url }, timeoutMs: 60_000 });
    expect(tool.stderr).toBe("");
    expect(tool.stdout).toBe("migrate: up to date\n");
    expect(tool.code).toBe(0);
  });

  describe("a program of a checkout of its own", () => {
    // A folder inside the repository (the bundles find their packages in its node_modules, as the
    // sources do) with a two-module program, main.ts, which prints the file node runs, its own
    // import.meta.url and its module's, and a second program, other.ts.
    let root: string;
    const at = (): { root: string } => ({ root });
    const entries = ["main.ts", "other.ts"];
    const output = async (args: string[]): Promise<{ ran: string; entry: string; module: string }> =>
      JSON.parse((await run(process.execPath, args, { cwd: root })).stdout);
    const touch = async (file: string, when: Date): Promise<void> =>
      utimes(path.join(root, file), when, when);

    beforeAll(async () => {
      await mkdir(path.join(REPO_ROOT, ".test-artifacts"), { recursive: true });
      root = await mkdtemp(path.join(REPO_ROOT, ".test-artifacts", "bundle-checkout-"));
      await writeFile(path.join(root, "where.ts"), "export const where: string = import.meta.url;\n");
      await writeFile(
        path.join(root, "main.ts"),
        'import { where } from "./where.ts";\nconsole.log(JSON.stringify({ ran: process.argv[1], entry: import.meta.url, module: where }));\n',
      );
      await writeFile(path.join(root, "other.ts"), 'console.log("other");\n');
    });
    afterAll(async () => {
      if (root) await rm(root, { recursive: true, force: true });
    });

    it("builds only when a program is not current, and runs each program's bundle while it is", async () => {
      expect(currentBundle("main.ts", at())).toBeUndefined();
      const told: string[][] = [];
      const onBuild = (stale: string[]): void => {
        told.push(stale);
      };
      expect(await buildStalePrograms({ ...at(), entries, onBuild })).toEqual(entries);
      expect(told).toEqual([entries]);
      const bundle = currentBundle("main.ts", at());
      expect(bundle).toBe(realpathSync(path.join(root, "dist/programs/main.mjs")));
      expect(programArgs("main.ts", at())).toEqual([bundle]);
      // Each module sees its source's URL, the entry's too.
      expect(await output([bundle!])).toEqual({
        ran: bundle,
        entry: pathToFileURL(path.join(root, "main.ts")).href,
        module: pathToFileURL(path.join(root, "where.ts")).href,
      });
      // All current: nothing built, nothing said.
      expect(await buildStalePrograms({ ...at(), entries, onBuild })).toEqual([]);
      expect(told).toHaveLength(1);
    });

    it("runs a program's sources through tsx once a file it was built from changed, until the next build", async () => {
      await buildStalePrograms({ ...at(), entries });
      await touch("where.ts", new Date(Date.now() + 60_000));
      expect(currentBundle("main.ts", at())).toBeUndefined();
      // A program not built from that file stays current.
      expect(currentBundle("other.ts", at())).toBeDefined();
      const args = programArgs("main.ts", at());
      expect(args).toEqual([
        "--import",
        pathToFileURL(path.join(REPO_ROOT, "node_modules/tsx/dist/loader.mjs")).href,
        path.join(root, "main.ts"),
      ]);
      expect((await output(args)).ran).toBe(path.join(root, "main.ts"));
      // Changed after the last build's start and before the next one's: built again, in a new
      // folder, and current.
      const before = currentBundle("other.ts", at());
      await sleep(5);
      await touch("where.ts", new Date());
      expect(await buildStalePrograms({ ...at(), entries })).toEqual(["main.ts"]);
      expect(currentBundle("main.ts", at())).toBeDefined();
      expect(currentBundle("other.ts", at())).not.toBe(before);
      // The build before stays for a program that was about to start from it.
      expect(existsSync(before!)).toBe(true);
    });

    it("takes no program for current without its build's manifest", async () => {
      await buildStalePrograms({ ...at(), entries });
      const build = path.dirname(currentBundle("main.ts", at())!);
      await rm(path.join(build, "manifest.json"));
      expect(currentBundle("main.ts", at())).toBeUndefined();
      expect(await buildStalePrograms({ ...at(), entries })).toEqual(entries);
    });

    it("refuses a program that imports another program's entry", async () => {
      await writeFile(path.join(root, "importer.ts"), 'import "./other.ts";\n');
      await expect(buildStalePrograms({ ...at(), entries: ["importer.ts", "other.ts"] })).rejects.toThrow(
        "importer.ts imports the program other.ts",
      );
    });
  });
});
