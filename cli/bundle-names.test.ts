import { execFile } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { ERROR_CLASSES } from "../client/index.ts";

// The bundle the `agent-wallet` bin runs (cli/build.mjs; the suite's setup builds it), run by itself:
// an error's name is its class's (`this.name = new.target.name`), printed by --help beside each exit
// code and in every error the CLI prints, and the bundle must not rename a class that another of its
// modules also declares (viem's RpcError).

const run = promisify(execFile);
const BUNDLE = path.join(path.dirname(fileURLToPath(import.meta.url)), "dist", "agent-wallet.mjs");

describe("the agent-wallet bundle", () => {
  // Mutation: without client/errors.ts pinning each class's name, --help lists `18  RpcError2`.
  it("names every error class in --help as the client declares it", async () => {
    const { stdout } = await run(process.execPath, [BUNDLE, "--help"]);
    const listed = [...stdout.matchAll(/^ +(\d+) {2}([A-Z]\w+): /gm)].map(([, code, name]) => [
      Number(code),
      name,
    ]);
    expect(listed).toEqual(ERROR_CLASSES.map((errorClass) => [errorClass.exitCode, errorClass.name]));
  });
});
