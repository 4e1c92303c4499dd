import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toHex } from "../shared/hex.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";

// `npm run mint-capability -- … --out FILE` offline (--instance-id and --counter: no enclave asked).
describe("npm run mint-capability --out", () => {
  let dir: string;
  const file = (name: string): string => path.join(dir, name);
  const mint = (out: string, ...extra: string[]): Promise<ToolRun> =>
    runTool(
      "ops/mint-capability.ts",
      [
        "--authority-key",
        file("authority.key"),
        "--op",
        "restore_backup",
        "--env-id",
        "mint-test",
        "--instance-id",
        toHex(randomBytes(16)),
        "--counter",
        "1",
        "--out",
        out,
        ...extra,
      ],
      { timeoutMs: 30_000 },
    );

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "mint-capability-"));
    await writeFile(file("authority.key"), `${toHex(randomBytes(32))}\n`, { mode: 0o600 });
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("writes a new 0600 file", async () => {
    const result = await mint(file("new.cap"));
    expect(result.code, result.stderr).toBe(0);
    expect((await stat(file("new.cap"))).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(file("new.cap"), "utf8"))).toMatchObject({});
  });

  it("refuses an existing file (exit 1) rather than leave the capability in a file others can read", async () => {
    // Mutation: writing over it keeps the file's own mode, 0644 here, with the capability in it.
    await writeFile(file("shared.cap"), "notes\n", { mode: 0o644 });
    const result = await mint(file("shared.cap"));
    expect(result).toMatchObject({ code: 1, stdout: "" });
    expect(result.stderr).toContain("exists; refusing to overwrite it");
    expect(await readFile(file("shared.cap"), "utf8")).toBe("notes\n");
  });

  // Number() took 1e3 as 1000, 0x10 as 16 and " 5" as 5, and signed that counter; a chain id it
  // could not read ended "error: only safe integers are canonical", exit 3.
  it.each([
    ["--counter", "1e3"],
    ["--counter", "0x10"],
    ["--counter", " 5"],
    ["--counter", "1.0"],
    ["--counter", "99999999999999999999"],
    ["--chain-id", "abc"],
    ["--chain-id", "77.5"],
    ["--chain-id", "1e100"],
  ])("%s %j: a usage error (exit 2) naming the flag, no capability written", async (flag, value) => {
    const out = file(`bad-${randomBytes(4).toString("hex")}.cap`);
    const result = await mint(out, flag, value);
    expect(result).toMatchObject({ code: 2, stdout: "" });
    expect(result.stderr).toMatch(new RegExp(`^mint-capability: ${flag} must be a whole number`));
    await expect(stat(out)).rejects.toThrow(/ENOENT/);
  });

  it("--params beside --params-file is a usage error (exit 2), not the file's params signed", async () => {
    await writeFile(file("params.json"), '{"batch_id":"from-the-file"}');
    const out = file("both.cap");
    const result = await mint(
      out,
      "--params",
      '{"batch_id":"from-the-line"}',
      "--params-file",
      file("params.json"),
    );
    expect(result).toMatchObject({ code: 2, stdout: "" });
    expect(result.stderr).toMatch(/^mint-capability: give --params or --params-file, not both\n/);
    await expect(stat(out)).rejects.toThrow(/ENOENT/);
  });

  it("--bytes-param NAME=FILE takes a path with an = in it whole", async () => {
    // Split at every `=`, pkg=/dir/a=b.package read /dir/a.
    await writeFile(file("a=b.package"), "package bytes");
    const out = file("bytes.cap");
    const result = await mint(out, "--bytes-param", `package=${file("a=b.package")}`);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(await readFile(out, "utf8"))).toMatchObject({ op: "restore_backup", counter: 1 });
  });
});
