import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runTool } from "../testing/run-tool.ts";
import { START_USAGE } from "./start-usage.ts";

// `npm start -- --help`, as a newcomer types it (docs/configuration.md#the-local-stack). Its port
// variable is no port, so a launcher that went on to start the stack instead stops at once on it,
// having made nothing, and never reaches a port or a folder of anyone's.
describe("npm start -- --help", () => {
  let dataDir = "";
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "agents-start-help-"));
  });
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });
  const env = (): Record<string, string> => ({ START_DATA_DIR: dataDir, ORIGIN_PORT: "not-a-port" });

  it.each([
    ["dev/start.mjs", "--help"],
    ["dev/start.ts", "--help"],
    ["dev/start.ts", "-h"],
  ])("%s %s prints the usage on stdout and exits 0, starting nothing", async (entry, flag) => {
    const ran = await runTool(entry, [flag], { env: env(), timeoutMs: 120_000 });
    expect(ran).toEqual({ code: 0, stdout: `${START_USAGE}\n`, stderr: "" });
    expect(await readdir(dataDir)).toEqual([]);
  });

  it("refuses any other argument (exit 2), starting nothing", async () => {
    const ran = await runTool("dev/start.ts", ["--port", "9000"], { env: env(), timeoutMs: 120_000 });
    expect(ran).toEqual({
      code: 2,
      stdout: "",
      stderr: `[start] takes no arguments, only its environment\n${START_USAGE}\n`,
    });
    expect(await readdir(dataDir)).toEqual([]);
  });
});
