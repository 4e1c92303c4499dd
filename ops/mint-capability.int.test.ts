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
  const mint = (out: string): Promise<ToolRun> =>
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
});
