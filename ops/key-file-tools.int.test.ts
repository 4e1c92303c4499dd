import { chmod, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runTool as run, type ToolRun } from "../testing/run-tool.ts";

function runTool(tool: string, ...args: string[]): Promise<ToolRun> {
  return run(tool, args, { timeoutMs: 30_000 });
}

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "key-file-tools-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe.each([
  {
    tool: "ops/enclave-authority.ts",
    script: "enclave-authority",
    fields: ["public_key", "key_file"],
    what: "an authority key",
  },
  {
    tool: "ops/recovery-key.ts",
    script: "recovery-key",
    fields: ["public_key", "fingerprint", "key_file"],
    what: "a recovery key",
  },
])("$tool", ({ tool, script, fields, what }) => {
  const file = (): string => path.join(dir, `${path.basename(tool, ".ts")}.key`);

  it("--out writes a new 0600 key file and prints its public parts; --show prints the same public key", async () => {
    const created = await runTool(tool, "--out", file());
    expect(created.code).toBe(0);
    const printed = JSON.parse(created.stdout) as Record<string, string>;
    expect(Object.keys(printed).sort()).toEqual([...fields].sort());
    expect(printed.key_file).toBe(file());
    expect((await stat(file())).mode & 0o777).toBe(0o600);
    const secret = (await readFile(file(), "utf8")).trim();
    expect(created.stdout).not.toContain(secret.slice(2));

    const shown = await runTool(tool, "--show", file());
    expect(shown).toMatchObject({ code: 0, stdout: `${printed.public_key}\n` });
  });

  it("refuses to overwrite an existing key file (exit 1, refused), which keeps its key", async () => {
    const existing = path.join(dir, `${path.basename(tool, ".ts")}.existing`);
    expect((await runTool(tool, "--out", existing)).code).toBe(0);
    const before = await readFile(existing, "utf8");
    const again = await runTool(tool, "--out", existing);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`refusing to overwrite ${what}`);
    expect(await readFile(existing, "utf8")).toBe(before);
  });

  it("--show of a file that holds no key is a usage error (exit 2) that does not print the file's text", async () => {
    const bogus = path.join(dir, `${path.basename(tool, ".ts")}.bogus`);
    await writeFile(bogus, "not-a-key-SECRETISH\n", { mode: 0o600 });
    const shown = await runTool(tool, "--show", bogus);
    expect(shown.code).toBe(2);
    expect(shown.stderr).toContain(`cannot read --show ${bogus}`);
    expect(shown.stderr).not.toContain("SECRETISH");
  });

  it("--show of a key file group or others may read is refused (exit 2, chmod 600), printing no key; at 0600 it is shown", async () => {
    const open = path.join(dir, `${path.basename(tool, ".ts")}.open`);
    const created = await runTool(tool, "--out", open);
    expect(created.code).toBe(0);
    await chmod(open, 0o640);
    // Mutation: reading the file whatever its mode prints its public key here, exit 0.
    const shown = await runTool(tool, "--show", open);
    expect({ code: shown.code, stdout: shown.stdout }).toEqual({ code: 2, stdout: "" });
    expect(shown.stderr).toContain(`cannot read --show ${open} (group or others may read it: chmod 600)`);
    expect(shown.stderr).not.toContain((await readFile(open, "utf8")).trim().slice(2));
    await chmod(open, 0o600);
    expect((await runTool(tool, "--show", open)).code).toBe(0);
  });

  it("answers a usage error with exit 2 and the usage", async () => {
    for (const args of [[], ["--out", file(), "--show", file()], ["--bogus"]]) {
      const run = await runTool(tool, ...args);
      expect({ args, code: run.code }).toEqual({ args, code: 2 });
      expect(run.stderr).toContain(`usage: npm run ${script} -- --out PATH | --show PATH`);
    }
  });
});
