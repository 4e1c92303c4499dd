/**
 * `npm run mcp` as an MCP host runs it: the program from its current bundle, spoken to over stdio by
 * the official client with its defaults (its 60 s request timeout among them), against the gateway
 * base URL a test gives, with a token of the real shape that the test can look for in what it reads.
 */
import { type ChildProcessByStdio, spawn } from "node:child_process";
import { once } from "node:events";
import type { Readable, Writable } from "node:stream";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { programArgs } from "../../ops/lib/program-bundles.mjs";
import { REPO_ROOT } from "../../testing/enclave-process.ts";

/** The server's AGENT_TOKEN: no answer, error or log line may hold it. */
export const HOST_TOKEN = `agt_${"ab".repeat(16)}_${"cd".repeat(32)}`;

export type ToolResult = { isError?: boolean; content: Array<{ type: string; text?: string }> };

export type StdioHost = {
  client: Client;
  /** What the server has written on stderr so far. */
  stderr(): string;
  close(): Promise<void>;
};

/** Starts the server against `baseUrl` (the chain segment included) and connects the official client. */
export async function connectStdioHost(baseUrl: string): Promise<StdioHost> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: programArgs("mcp/main.ts"),
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH ?? "", AGENT_TOKEN: HOST_TOKEN, AGENT_BASE_URL: baseUrl },
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

export function spawnBareServer(baseUrl: string, stdout: "pipe" | "ignore"): BareServer {
  // A union for stdout leaves spawn's overloads without the pipes' types: named here.
  const child = spawn(process.execPath, programArgs("mcp/main.ts"), {
    cwd: REPO_ROOT,
    env: { PATH: process.env.PATH, AGENT_TOKEN: HOST_TOKEN, AGENT_BASE_URL: baseUrl },
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
