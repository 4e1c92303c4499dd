import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, readFile, rm, utimes, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PROGRAMS, REPO_ROOT } from "./program-bundles.mjs";

const run = promisify(execFile);

// The npm scripts' runner (run-program.mjs), in a checkout of its own: a folder inside the
// repository (its packages are the repository's) holding copies of the runner and of
// program-bundles.mjs, and one program at a name the runner knows, ops/agents.ts, which prints
// what it was given and the file its code runs from.
describe("node ops/lib/run-program.mjs PROGRAM (the operator tools' npm scripts)", () => {
  let root: string;
  const runner = (): string => path.join(root, "ops/lib/run-program.mjs");
  const outcome = async (args: string[]) => {
    const { stdout } = await run(process.execPath, [runner(), ...args], { cwd: root });
    return JSON.parse(stdout) as { argv1: string; args: string[]; runsFrom: string };
  };

  beforeAll(async () => {
    await mkdir(path.join(REPO_ROOT, ".test-artifacts"), { recursive: true });
    root = await mkdtemp(path.join(REPO_ROOT, ".test-artifacts", "run-program-"));
    await mkdir(path.join(root, "ops/lib"), { recursive: true });
    for (const file of ["program-bundles.mjs", "run-program.mjs"])
      await copyFile(path.join(REPO_ROOT, "ops/lib", file), path.join(root, "ops/lib", file));
    // The top frame of a stack names the file the code runs from: the bundle, or the source.
    await writeFile(
      path.join(root, "ops/agents.ts"),
      [
        'const frame = (new Error().stack ?? "").split("\\n")[1] ?? "";',
        "const runsFrom: string = /\\((.*?):\\d+:\\d+\\)$|at (.*?):\\d+:\\d+$/.exec(frame)?.slice(1).find(Boolean) ?? frame;",
        "console.log(JSON.stringify({ argv1: process.argv[1], args: process.argv.slice(2), runsFrom }));",
        "",
      ].join("\n"),
    );
    const bundles = await import(path.join(root, "ops/lib/program-bundles.mjs"));
    await bundles.buildStalePrograms({ root, entries: ["ops/agents.ts"] });
  });
  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  it("runs the program's bundle while it is current, with the program's own arguments", async () => {
    const ran = await outcome(["ops/agents.ts", "list", "--json"]);
    expect(ran.args).toEqual(["list", "--json"]);
    expect(ran.argv1).toBe(path.join(root, "ops/agents.ts"));
    expect(ran.runsFrom).toMatch(/\/dist\/program-builds\/[^/]+\/ops\/agents\.mjs$/);
  });

  it("runs the program's sources through tsx once one changed since the build", async () => {
    const later = new Date(Date.now() + 60_000);
    await utimes(path.join(root, "ops/agents.ts"), later, later);
    const ran = await outcome(["ops/agents.ts", "list"]);
    expect(ran.args).toEqual(["list"]);
    expect(ran.runsFrom).toMatch(/\/ops\/agents\.ts$/);
  });

  it("refuses a name that is not one of the programs, with the list, exit 64", async () => {
    const refused = await run(process.execPath, [runner(), "ops/unknown.ts"], { cwd: root }).then(
      () => ({ code: 0, stderr: "" }),
      (error: { code: number; stderr: string }) => error,
    );
    expect(refused.code).toBe(64);
    expect(refused.stderr).toContain("usage: node ops/lib/run-program.mjs PROGRAM [ARGS…]");
    expect(refused.stderr).toContain("ops/agents.ts");
  });
});

describe("a node's services run from their bundles (docs/operations.md, service units)", () => {
  it("starts each unit's program through run-program.mjs, naming a program it knows", async () => {
    const doc = await readFile(path.join(REPO_ROOT, "docs/operations.md"), "utf8");
    const starts = [...doc.matchAll(/^ExecStart=(.*)$/gm)].map((match) => match[1]!);
    expect(starts.length).toBeGreaterThanOrEqual(2);
    for (const start of starts) {
      const program = /^\/usr\/bin\/node ops\/lib\/run-program\.mjs (\S+)/.exec(start)?.[1];
      expect(program, start).toBeDefined();
      expect(PROGRAMS, start).toContain(program);
    }
  });

  it("npm run origin runs the origin: it reads its configuration and refuses a bad one, exit 1", async () => {
    const refused = await run("npm", ["run", "--silent", "origin"], {
      cwd: REPO_ROOT,
      env: { ...process.env, ORIGIN_PORT: "not-a-port" },
    }).then(
      () => ({ code: 0, stderr: "" }),
      (error: { code: number; stderr: string }) => error,
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("origin: invalid configuration");
    expect(refused.stderr).toContain("ORIGIN_PORT: must be a whole number");
  });

  it("npm run build says the bundles are current when no source changed since the last build", async () => {
    // The run's global setup built every program.
    const { stdout } = await run("npm", ["run", "--silent", "build"], { cwd: REPO_ROOT });
    expect(stdout).toBe(`[build] all ${PROGRAMS.length} programs' bundles are current\n`);
  });
});
