import { describe, expect, it } from "vitest";
import { runTool } from "../testing/run-tool.ts";
import { USAGE } from "./cli-args.ts";

// `npm run enclave -- --help`, as an operator types it after `npm run agents -- --help` and the
// other tools (docs/operations.md#exit-codes-of-the-operator-tools): the enclave's own process.
describe("npm run enclave -- --help", () => {
  // Mutation: without the help flag, the parser refuses it as an unknown option, exit 64.
  it.each(["--help", "-h"])("%s prints the usage on stdout and exits 0, serving nothing", async (flag) => {
    const ran = await runTool("ops/lib/run-program.mjs", ["enclave/main.ts", flag], { timeoutMs: 60_000 });
    expect(ran.stderr).toBe("");
    expect(ran.code).toBe(0);
    expect(ran.stdout).toBe(`${USAGE}\n`);
  });
});
