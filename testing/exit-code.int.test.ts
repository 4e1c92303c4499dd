import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { REPO_ROOT } from "./enclave-process.ts";

// `npm test` must exit non-zero when a test fails or a file fails to load, whether the
// suite starts its own embedded Postgres (DATABASE_URL unset, the default and CI) or uses a server.
// Each case runs a child `npm test` on throwaway fixtures, as a user would run one file.

const run = promisify(execFile);
const probeDir = path.join(REPO_ROOT, ".test-probes", randomBytes(6).toString("hex"));
const fixture = (name: string): string => path.relative(REPO_ROOT, path.join(probeDir, name));

type ChildRun = { code: number; output: string };

async function npmTest(files: string[], env: Record<string, string | undefined>): Promise<ChildRun> {
  // A child writes only the report its case names, never the parent's (.ci/run's): a parent that
  // failed before writing its own would leave a child's one-file report for the CI summary.
  const { VITEST_JSON_REPORT: _parentReport, ...inherited } = process.env;
  const childEnv: NodeJS.ProcessEnv = { ...inherited, VITEST_RUN_PROBES: "1", ...env };
  for (const [name, value] of Object.entries(env)) if (value === undefined) delete childEnv[name];
  // The parent's vitest worker marks itself; a child must not think it is a worker too.
  for (const name of Object.keys(childEnv))
    if (name.startsWith("VITEST_POOL") || name === "VITEST_WORKER_ID") delete childEnv[name];
  try {
    const { stdout, stderr } = await run("npm", ["test", "--silent", "--", ...files], {
      cwd: REPO_ROOT,
      env: childEnv,
      timeout: 120_000,
    });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code?: number; stdout?: string; stderr?: string };
    return {
      code: typeof failed.code === "number" ? failed.code : -1,
      output: `${failed.stdout}${failed.stderr}`,
    };
  }
}

beforeAll(async () => {
  await mkdir(probeDir, { recursive: true });
  await writeFile(
    path.join(probeDir, "failing.test.ts"),
    'import { expect, test } from "vitest";\ntest("fails on purpose", () => { expect(1).toBe(2); });\n',
  );
  await writeFile(
    path.join(probeDir, "passing.test.ts"),
    'import { expect, test } from "vitest";\ntest("passes", () => { expect(1).toBe(1); });\n',
  );
  await writeFile(
    path.join(probeDir, "unloadable.test.ts"),
    'import { test } from "vitest";\nthrow new Error("this file fails to load");\ntest("never collected", () => {});\n',
  );
});

afterAll(async () => {
  await rm(probeDir, { recursive: true, force: true });
});

describe("npm test exit code (child runs)", () => {
  it("is 1 for a failing test and for a file that fails to load, with the embedded Postgres", async () => {
    const [failing, unloadable] = await Promise.all([
      npmTest([fixture("failing.test.ts")], { DATABASE_URL: undefined }),
      npmTest([fixture("unloadable.test.ts")], { DATABASE_URL: undefined }),
    ]);
    expect(failing.output).toContain("1 failed");
    expect(failing.code).toBe(1);
    expect(unloadable.output).toContain("this file fails to load");
    expect(unloadable.code).toBe(1);
  });

  it("is 1 for a failing test and for a file that fails to load, with DATABASE_URL set", async () => {
    const databaseUrl = inject("pgAdminUrl");
    const [failing, unloadable] = await Promise.all([
      npmTest([fixture("failing.test.ts")], { DATABASE_URL: databaseUrl }),
      npmTest([fixture("unloadable.test.ts")], { DATABASE_URL: databaseUrl }),
    ]);
    expect(failing.code).toBe(1);
    expect(unloadable.code).toBe(1);
  });

  it("is 0 when every test passes, and the CI summary line counts what ran", async () => {
    const databaseUrl = inject("pgAdminUrl");
    const report = path.join(probeDir, "report.json");
    const passing = await npmTest([fixture("passing.test.ts")], { DATABASE_URL: databaseUrl });
    expect(passing.code).toBe(0);

    const mixed = await npmTest(
      [fixture("passing.test.ts"), fixture("failing.test.ts"), fixture("unloadable.test.ts")],
      { DATABASE_URL: databaseUrl, VITEST_JSON_REPORT: report },
    );
    expect(mixed.code).toBe(1);
    expect(JSON.parse(await readFile(report, "utf8"))).toMatchObject({
      numPassedTests: 1,
      numFailedTests: 1,
    });
    const summary = await run(process.execPath, ["--import", "tsx", "dev/ci-summary.ts", report], {
      cwd: REPO_ROOT,
    }).catch((error: { code: number; stdout: string }) => error);
    // One passed, one failed test, and the file that never loaded counts as one more failure.
    expect(summary.stdout).toBe("1 passed, 2 failed\n");
  });
});
