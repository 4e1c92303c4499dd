import { execFile } from "node:child_process";
import { copyFile, mkdir, mkdtemp, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

// The `agent-wallet` bin chooses between the bundle cli/build.mjs made and the TypeScript sources
// (docs/performance.md, "The agent CLI's start"): the bundle only while it is current. Run here on
// a copy of the bin in a temporary checkout whose bundle and sources each print their name.

const run = promisify(execFile);
const BIN = path.join(path.dirname(fileURLToPath(import.meta.url)), "agent-wallet.mjs");
const REPO_ROOT = path.resolve(path.dirname(BIN), "..");

describe("the agent-wallet bin runs its bundle only while it is current", () => {
  let root: string;
  const at = (relative: string): string => path.join(root, relative);
  const runBin = async (): Promise<string> =>
    (await run(process.execPath, [at("cli/agent-wallet.mjs")], { cwd: root })).stdout.trim();
  /** Sets a file's modification time, seconds from now. */
  const age = (relative: string, seconds: number): Promise<void> => {
    const when = new Date(Date.now() + seconds * 1000);
    return utimes(at(relative), when, when);
  };

  beforeAll(async () => {
    root = await mkdtemp(path.join(tmpdir(), "agent-wallet-bin-"));
    await mkdir(at("cli/dist"), { recursive: true });
    await mkdir(at("shared"));
    await copyFile(BIN, at("cli/agent-wallet.mjs"));
    // tsx, for the sources' path, from the repository's dependencies.
    await symlink(path.join(REPO_ROOT, "node_modules"), at("node_modules"), "dir");
    await writeFile(at("package.json"), JSON.stringify({ type: "module" }));
    await writeFile(at("cli/main.ts"), 'const from: string = "sources";\nconsole.log(from);\n');
    await writeFile(at("shared/used.ts"), "export const used = 1;\n");
    await writeFile(at("cli/dist/agent-wallet.mjs"), 'console.log("bundle");\n');
    await writeFile(at("cli/dist/inputs.json"), JSON.stringify(["cli/main.ts", "shared/used.ts"]));
  });
  afterAll(async () => {
    await rm(root, { recursive: true, force: true });
  });

  // Mutation: a bin that imports the bundle whenever it exists fails the second and third cases.
  it("the bundle, newer than every input", async () => {
    await age("cli/main.ts", -60);
    await age("shared/used.ts", -60);
    await age("cli/dist/agent-wallet.mjs", -1);
    expect(await runBin()).toBe("bundle");
  });

  it("the sources, through tsx, once an input is newer than the bundle (an edited checkout)", async () => {
    await age("shared/used.ts", 0);
    expect(await runBin()).toBe("sources");
    await age("shared/used.ts", -60);
  });

  it("the sources when an input is gone, or the bundle's list is", async () => {
    await rm(at("shared/used.ts"));
    expect(await runBin()).toBe("sources");
    await writeFile(at("shared/used.ts"), "export const used = 1;\n");
    await age("shared/used.ts", -60);
    expect(await runBin()).toBe("bundle");
    await rm(at("cli/dist/inputs.json"));
    expect(await runBin()).toBe("sources");
  });
});
