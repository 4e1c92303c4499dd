import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { closeSync, constants, openSync, writeSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runTool } from "../testing/run-tool.ts";
import { fund, newAccount, rpc } from "./testing.ts";
import { DEVNET_USAGE } from "./usage.ts";

type Running = { child: ChildProcess; url: string; exited: Promise<number | null> };

/** Starts the devnet as `npm run devnet` does (its bundle while current) and waits for its URL line. */
async function startCli(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
  stderr: "pipe" | number = "pipe",
): Promise<Running> {
  const child = spawn(process.execPath, ["ops/lib/run-program.mjs", "devnet/main.ts", ...args], {
    cwd: path.resolve(import.meta.dirname, ".."),
    stdio: ["ignore", "pipe", stderr],
    env,
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  // Bounded, and killed past it: a devnet held before its URL line must not outlive its test.
  const firstLine = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error("devnet printed no URL line within 30 s"));
    }, 30_000);
    createInterface({ input: child.stdout! }).once("line", (line) => {
      clearTimeout(timer);
      resolve(line);
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`devnet exited with ${code}`));
    });
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

  it.each(["stdout", "stderr"] as const)(
    "with its %s closed (a supervisor's log collector gone), still saves --state on SIGTERM and exits 0",
    async (output) => {
      const file = path.join(dir, `state-${output}-closed.json`);
      const account = newAccount();
      const devnet = await startCli(["--port", "0", "--state", file]);
      await fund(devnet.url, account.address, 4321n);
      // The reader's end closed: the devnet's next line there (its "stopping") fails with EPIPE.
      devnet.child[output]?.destroy();
      devnet.child.kill("SIGTERM");
      expect(await devnet.exited).toBe(0);
      expect(JSON.parse(await readFile(file, "utf8")).blocks).toHaveLength(2);
    },
  );

  // A log collector that stops reading without closing: the devnet's stderr a pipe already full
  // (a FIFO the test holds open and never reads, filled to its 64 KiB before the devnet starts), so
  // each of its lines meets a full pipe. Node writes to a pipe without blocking and queues the
  // line: the chain goes on; a write that blocked would hold the devnet before its URL line.
  it("with a reader that stops reading (its stderr pipe full), answers, mines, and still saves --state on SIGTERM and exits 0", async () => {
    const fifo = path.join(dir, "stalled-stderr");
    execFileSync("mkfifo", [fifo]);
    // Read-write, so that opening waits for no reader; nothing ever reads it. The test fills it
    // through an end of its own, non-blocking; the devnet gets another, blocking as a
    // supervisor's pipe is, for whatever the devnet makes of it.
    const held = openSync(fifo, constants.O_RDWR | constants.O_NONBLOCK);
    const devnetEnd = openSync(fifo, constants.O_RDWR);
    try {
      let filled = 0;
      for (;;) {
        try {
          filled += writeSync(held, Buffer.alloc(4096, "x"));
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code !== "EAGAIN") throw error;
          break;
        }
      }
      expect(filled).toBeGreaterThan(0);
      const file = path.join(dir, "state-stalled-stderr.json");
      const account = newAccount();
      const devnet = await startCli(["--port", "0", "--state", file], process.env, devnetEnd);
      await fund(devnet.url, account.address, 777n);
      expect((await rpc(devnet.url, "eth_blockNumber")).result).toBe("0x1");
      const timer = setTimeout(() => devnet.child.kill("SIGKILL"), 15_000);
      devnet.child.kill("SIGTERM");
      const code = await devnet.exited;
      clearTimeout(timer);
      expect(code).toBe(0);
      expect(JSON.parse(await readFile(file, "utf8")).blocks).toHaveLength(2);
    } finally {
      closeSync(devnetEnd);
      closeSync(held);
    }
  }, 60_000);

  it("exits with a parent that was gone before it had started (an IPC channel already closed), never running on as an orphan", async () => {
    // The local-stack launcher starts it with an IPC channel, and a launcher stopped during its own
    // start-up could go before the devnet listened for it: the devnet then ran on for good.
    const child = spawn(process.execPath, ["ops/lib/run-program.mjs", "devnet/main.ts", "--port", "0"], {
      cwd: path.resolve(import.meta.dirname, ".."),
      stdio: ["ignore", "ignore", "ignore", "ipc"],
    });
    const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
    try {
      child.disconnect();
      const outcome = await Promise.race([
        exited,
        new Promise((resolve) => setTimeout(() => resolve("still running 20 s later"), 20_000)),
      ]);
      expect(outcome).toBe(0);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    }
  }, 60_000);

  it("makes no terminal check for the loggers ethereumjs builds as blocks are mined and read", async () => {
    // A preload counting the devnet process's tty.isatty calls, told on stderr as it exits.
    const preload = path.join(dir, "count-isatty.mjs");
    await writeFile(
      preload,
      [
        'import tty from "node:tty";',
        'import { writeSync } from "node:fs";',
        "let calls = 0;",
        "const isatty = tty.isatty;",
        "tty.isatty = (fd) => { calls++; return isatty(fd); };",
        `process.on("exit", () => writeSync(2, "isatty calls: " + calls + "\\n"));`,
      ].join("\n"),
    );
    const { DEBUG_COLORS: _, ...env } = process.env;
    const devnet = await startCli(["--port", "0"], {
      ...env,
      NODE_OPTIONS: `--import ${pathToFileURL(preload).href}`,
    });
    let stderr = "";
    devnet.child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    // Each block gets a view of its state when it is read at `latest`: a trie and caches, each
    // with its loggers, which asked once each before the entry set DEBUG_COLORS.
    const account = newAccount();
    for (let i = 1; i <= 20; i++) {
      await fund(devnet.url, account.address, BigInt(i));
      expect((await rpc(devnet.url, "eth_getBalance", [account.address, "latest"])).result).toBe(
        `0x${i.toString(16)}`,
      );
    }
    devnet.child.kill("SIGTERM");
    expect(await devnet.exited).toBe(0);
    const calls = Number(/isatty calls: (\d+)/.exec(stderr)?.[1]);
    expect(calls).toBeLessThan(10);
  });

  // docs/development.md: `npm run devnet -- --help` as a newcomer types it after the enclave's.
  it.each(["--help", "-h"])("%s prints the usage on stdout and exits 0, serving nothing", async (flag) => {
    // DEVNET_PORT names a port, so a devnet that served instead would print its URL, not the usage.
    const ran = await runTool("devnet/main.ts", [flag], { env: { DEVNET_PORT: "0" }, timeoutMs: 30_000 });
    expect(ran).toEqual({ code: 0, stdout: `${DEVNET_USAGE}\n`, stderr: "" });
  });

  it("refuses a malformed flag with a message and exit code 1", async () => {
    const { code, stderr } = await runTool("devnet/main.ts", ["--operator-pool", "0x12"]);
    expect(code).toBe(1);
    expect(stderr).toContain("--operator-pool must be a 20-byte hex address");
  });
});
