import { describe, expect, it } from "vitest";
import { runTool } from "../testing/run-tool.ts";
import { ORIGIN_USAGE } from "./usage.ts";

// `npm run origin -- --help`, as a newcomer types it after `npm run enclave -- --help`
// (docs/development.md): the origin's own process. Its database is one nothing answers on, so an
// origin that started serving instead fails to open it rather than reaching any real one.
describe("npm run origin -- --help", () => {
  const env = { DATABASE_URL: "postgres://nobody@127.0.0.1:1/none", ORIGIN_PORT: "0", LOG_LEVEL: "silent" };

  it.each(["--help", "-h"])("%s prints the usage on stdout and exits 0, serving nothing", async (flag) => {
    const ran = await runTool("ops/lib/run-program.mjs", ["origin/main.ts", flag], {
      env,
      timeoutMs: 60_000,
    });
    expect(ran).toEqual({ code: 0, stdout: `${ORIGIN_USAGE}\n`, stderr: "" });
  });

  it("refuses any other argument as a usage error (exit 2), serving nothing", async () => {
    const ran = await runTool("ops/lib/run-program.mjs", ["origin/main.ts", "--port", "9999"], {
      env,
      timeoutMs: 60_000,
    });
    expect(ran).toEqual({
      code: 2,
      stdout: "",
      stderr: `origin: takes no arguments (it is configured by its environment)\n${ORIGIN_USAGE}\n`,
    });
  });
});
