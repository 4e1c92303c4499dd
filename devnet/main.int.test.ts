import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runTool } from "../testing/run-tool.ts";
import { fund, newAccount, rpc } from "./testing.ts";

type Running = { child: ChildProcess; url: string; exited: Promise<number | null> };

/** Starts the devnet as `npm run devnet` does (its bundle while current) and waits for its URL line. */
async function startCli(args: string[]): Promise<Running> {
  const child = spawn(process.execPath, ["ops/lib/run-program.mjs", "devnet/main.ts", ...args], {
    cwd: path.resolve(import.meta.dirname, ".."),
    stdio: ["ignore", "pipe", "pipe"],
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const firstLine = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).once("line", resolve);
    child.once("exit", (code) => reject(new Error(`devnet exited with ${code}`)));
  });
  const url = /^devnet listening on (http:\/\/\S+)$/.exec(firstLine)?.[1];
  if (url === undefined) throw new Error(`unexpected first line: ${firstLine}`);
  return { child, url, exited };
}

describe("devnet: the CLI (npm run devnet)", () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "devnet-cli-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("prints its URL, serves JSON-RPC, and saves --state on SIGTERM and SIGINT", async () => {
    const file = path.join(dir, "state.json");
    const account = newAccount();

    const first = await startCli(["--port", "0", "--state", file]);
    expect(first.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect((await rpc(first.url, "eth_chainId")).result).toBe("0x4d");
    await fund(first.url, account.address, 1234n);
    first.child.kill("SIGTERM");
    expect(await first.exited).toBe(0);
    expect(JSON.parse(await readFile(file, "utf8")).blocks).toHaveLength(2);

    const second = await startCli(["--port", "0", "--state", file]);
    expect((await rpc(second.url, "eth_getBalance", [account.address, "latest"])).result).toBe("0x4d2");
    expect((await rpc(second.url, "eth_blockNumber")).result).toBe("0x1");
    second.child.kill("SIGINT");
    expect(await second.exited).toBe(0);
  });

  it("refuses a malformed flag with a message and exit code 1", async () => {
    const { code, stderr } = await runTool("devnet/main.ts", ["--operator-pool", "0x12"]);
    expect(code).toBe(1);
    expect(stderr).toContain("--operator-pool must be a 20-byte hex address");
  });
});
