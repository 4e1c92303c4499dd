/**
 * `npm run mcp` as an MCP host runs it: the program from its current bundle, spoken to over stdio by
 * the official client with its defaults (its 60 s request timeout among them, unless the test names
 * a shorter one to the server and to its calls alike), against the gateway
 * base URL a test gives, with a token of the real shape that the test can look for in what it reads.
 */
import { type ChildProcessByStdio, spawn } from "node:child_process";
import { once } from "node:events";
import type { Readable, Writable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { programArgs } from "../../ops/lib/program-bundles.mjs";
import { REPO_ROOT } from "../../testing/enclave-process.ts";
import { startLoopbackServer } from "../../testing/loopback-server.ts";

/** The server's AGENT_TOKEN: no answer, error or log line may hold it. */
export const HOST_TOKEN = `agt_${"ab".repeat(16)}_${"cd".repeat(32)}`;

export type ToolResult = { isError?: boolean; content: Array<{ type: string; text?: string }> };

export type StdioHost = {
  client: Client;
  /** What the server has written on stderr so far. */
  stderr(): string;
  close(): Promise<void>;
};

/**
 * A host that times out after 20 s (AGENT_MCP_HOST_TIMEOUT_SECONDS, and the client's `timeout` on
 * each call): its server's tool calls end 10 s in, where the official client's default 60 s puts
 * them at 50 s (mcp/host-timeout.ts), so a test that waits a deadline out waits 10 s.
 */
export const SHORT_HOST_TIMEOUT_SECONDS = 20;

/**
 * Starts the server against `baseUrl` (the chain segment included) and connects the official client.
 * `hostTimeoutSeconds` is told to the server; the test passes the same to its calls as `timeout`.
 */
export async function connectStdioHost(
  baseUrl: string,
  options: { hostTimeoutSeconds?: number } = {},
): Promise<StdioHost> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: programArgs("mcp/main.ts"),
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH ?? "",
      AGENT_TOKEN: HOST_TOKEN,
      AGENT_BASE_URL: baseUrl,
      ...hostTimeoutEnv(options.hostTimeoutSeconds),
    },
    stderr: "pipe",
  });
  let stderr = "";
  transport.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const client = new Client({ name: "mcp-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, stderr: () => stderr, close: () => client.close() };
}

function hostTimeoutEnv(seconds: number | undefined): Record<string, string> {
  return seconds === undefined ? {} : { AGENT_MCP_HOST_TIMEOUT_SECONDS: String(seconds) };
}

/** A tool result's text parts, joined. */
export function resultText(result: ToolResult): string {
  return result.content.map((part) => part.text ?? "").join("");
}

/**
 * The server started bare, for a test that plays a host that misbehaves (writes past a limit, goes
 * away mid-call): it writes the lines itself, and reads the exit and stderr.
 */
export type BareServer = {
  child: ChildProcessByStdio<Writable, Readable | null, Readable>;
  /** One JSON-RPC message, a line of the server's stdin. */
  send(message: unknown): void;
  /** The handshake a host makes before any call: initialize, then initialized. */
  initialize(): void;
  exited: Promise<[number | null, NodeJS.Signals | null]>;
  stderr(): string;
};

export function spawnBareServer(
  baseUrl: string,
  stdout: "pipe" | "ignore",
  options: { hostTimeoutSeconds?: number } = {},
): BareServer {
  // A union for stdout leaves spawn's overloads without the pipes' types: named here.
  const child = spawn(process.execPath, programArgs("mcp/main.ts"), {
    cwd: REPO_ROOT,
    env: {
      PATH: process.env.PATH,
      AGENT_TOKEN: HOST_TOKEN,
      AGENT_BASE_URL: baseUrl,
      ...hostTimeoutEnv(options.hostTimeoutSeconds),
    },
    stdio: ["pipe", stdout, "pipe"],
  }) as ChildProcessByStdio<Writable, Readable | null, Readable>;
  let stderr = "";
  child.stderr.on("data", (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const send = (message: unknown): void => {
    child.stdin.write(`${JSON.stringify(message)}\n`);
  };
  return {
    child,
    send,
    initialize() {
      send({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: {
          protocolVersion: "2025-06-18",
          capabilities: {},
          clientInfo: { name: "test", version: "1" },
        },
      });
      send({ jsonrpc: "2.0", method: "notifications/initialized" });
    },
    exited: once(child, "exit") as Promise<[number | null, NodeJS.Signals | null]>,
    stderr: () => stderr,
  };
}

/**
 * A bare server (short host timeout) whose `balance` call (JSON-RPC id 2) a silent gateway has taken
 * and never answers: a loopback server stands in for a gateway that stalls so. Resolves once the
 * request has reached it; `close` kills the server and stops the gateway.
 */
export async function balanceCallAtSilentGateway(): Promise<{ server: BareServer; close(): Promise<void> }> {
  let received!: () => void;
  const reached = new Promise<void>((resolve) => {
    received = resolve;
  });
  const gateway = await startLoopbackServer(async () => {
    received();
  });
  const server = spawnBareServer(`${gateway.url}/77`, "ignore", {
    hostTimeoutSeconds: SHORT_HOST_TIMEOUT_SECONDS,
  });
  // An orphan the test could not end is killed all the same.
  const killer = setTimeout(() => server.child.kill("SIGKILL"), 40_000);
  server.initialize();
  server.send({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "balance", arguments: {} } });
  await reached;
  return {
    server,
    async close() {
      clearTimeout(killer);
      server.child.kill("SIGKILL");
      await gateway.close();
    },
  };
}
