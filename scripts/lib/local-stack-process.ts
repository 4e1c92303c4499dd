/**
 * The local stack of `npm start` (scripts/start.ts) launched as a child in a throwaway data
 * folder on free ports, for a benchmark or a demo that needs the whole stack, edge included.
 * Its printed lines give the edge URL and the operator-provisioned agent token.
 */
import { chmod, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort } from "../test/free-port.ts";
import { type ManagedChild, startChild } from "./supervisor.ts";

export type LocalStackProcess = {
  /** The edge with the base path, e.g. http://127.0.0.1:8787/77. */
  edgeBase: string;
  originBase: string;
  devnetUrl: string;
  /** The agent token `npm start` printed, when it provisioned one. */
  agentToken: string | undefined;
  agentWallet: string | undefined;
  child: ManagedChild;
  stop(): Promise<void>;
};

export type LaunchLocalStackParams = {
  /** Receives the launcher's lines (quiet by default). */
  onLine?: (line: string) => void;
  timeoutMs?: number;
  env?: Record<string, string>;
};

export async function launchLocalStack(params: LaunchLocalStackParams = {}): Promise<LocalStackProcess> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "local-stack-"));
  await chmod(dataDir, 0o755);
  const [originPort, devnetPort, edgePort, pgPort] = [
    await freePort(),
    await freePort(),
    await freePort(),
    await freePort(),
  ];
  const lines: string[] = [];
  const child = startChild({
    name: "start",
    entry: "scripts/start.ts",
    env: {
      ...process.env,
      START_DATA_DIR: dataDir,
      ORIGIN_PORT: String(originPort),
      DEVNET_PORT: String(devnetPort),
      EDGE_PORT: String(edgePort),
      EMBEDDED_PG_PORT: String(pgPort),
      LOG_LEVEL: "warn",
      ...params.env,
    },
    onLine: (line) => {
      lines.push(line);
      params.onLine?.(line);
    },
  });
  const stop = async (): Promise<void> => {
    await child.stop(30_000);
    await rm(dataDir, { recursive: true, force: true });
  };
  const deadline = Date.now() + (params.timeoutMs ?? 180_000);
  while (!lines.some((line) => line.includes("Ctrl-C stops everything"))) {
    if (child.process.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new Error(`npm start did not come up:\n${lines.slice(-15).join("\n")}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  /** The value of the launcher's `[start] label   value` line whose value matches `value`. */
  const field = (label: string, value: string): string | undefined =>
    lines
      .map((line) => new RegExp(`\\[start\\] ${label}\\s+(${value})`).exec(line)?.[1])
      .find((found) => found !== undefined);
  const agentLine = lines
    .map((line) => /\[start\] agent\s+\S+ wallet (0x[0-9a-fA-F]{40})/.exec(line))
    .find(Boolean);
  return {
    edgeBase: field("edge", "https?://\\S+") ?? `http://127.0.0.1:${edgePort}/77`,
    originBase: field("origin", "https?://\\S+") ?? `http://127.0.0.1:${originPort}/77`,
    devnetUrl: `http://127.0.0.1:${devnetPort}`,
    agentToken: field("token", "agt_\\S+"),
    agentWallet: agentLine?.[1],
    child,
    stop,
  };
}
