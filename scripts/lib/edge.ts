/**
 * Runs the edge worker locally in Miniflare (the real workerd), for `npm start` and the edge's
 * tests alike: bundles `main` of wrangler.toml with esbuild, then serves it on a loopback port
 * with wrangler.toml's compatibility date and vars, as `wrangler deploy` would ship them.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Miniflare } from "miniflare";

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

export type WranglerConfig = {
  name: string;
  main: string;
  compatibilityDate: string;
  vars: Record<string, string>;
};

/**
 * Reads the flat subset of TOML that wrangler.toml uses: `key = "string"` lines at the top level
 * and under `[vars]`. Anything else stops here, so the local edge never silently differs from
 * the deployed one (extend this reader when wrangler.toml grows).
 */
export async function readWranglerConfig(
  file = path.join(REPO_ROOT, "wrangler.toml"),
): Promise<WranglerConfig> {
  const top: Record<string, string> = {};
  const vars: Record<string, string> = {};
  let section = top;
  for (const [index, raw] of (await readFile(file, "utf8")).split("\n").entries()) {
    const line = raw.trim();
    if (line === "" || line.startsWith("#")) continue;
    if (line === "[vars]") {
      section = vars;
      continue;
    }
    const pair = /^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([^"\\]*)"\s*(#.*)?$/.exec(line);
    if (!pair?.[1] || pair[2] === undefined) {
      throw new Error(`${path.basename(file)}:${index + 1}: scripts/lib/edge.ts reads only key = "string"`);
    }
    section[pair[1]] = pair[2];
  }
  const { name, main, compatibility_date: compatibilityDate } = top;
  if (!name || !main || !compatibilityDate) {
    throw new Error(`${path.basename(file)} needs name, main and compatibility_date`);
  }
  return { name, main, compatibilityDate, vars };
}

/**
 * Bundles the worker for workerd. The `neutral` platform resolves no Node built-in, so a `node:`
 * import in edge-worker/ fails here instead of at deploy time (DESIGN §2).
 */
export async function bundleEdgeWorker(entry: string): Promise<string> {
  const result = await build({
    entryPoints: [path.resolve(REPO_ROOT, entry)],
    bundle: true,
    format: "esm",
    platform: "neutral",
    target: "es2022",
    conditions: ["workerd", "worker", "browser"],
    mainFields: ["module", "main"],
    write: false,
    logLevel: "silent",
  });
  const output = result.outputFiles[0];
  if (!output) throw new Error("esbuild produced no output for the edge worker");
  return output.text;
}

export type StartEdgeParams = {
  /** The origin, scheme://host:port (the worker's ORIGIN_URL). */
  originUrl: string;
  /** EDGE_SHARED_SECRET; leave it out to run an edge that refuses registration (503). */
  edgeSharedSecret?: string;
  /** 0 (the default) lets the kernel pick a free port. */
  port?: number;
  /** BASE_PATH; wrangler.toml's by default. */
  basePath?: string;
  /** Receives every line the worker logs; by default printed with an `[edge]` prefix. */
  onLine?: (line: string) => void;
  /**
   * The caller stops the edge itself on SIGINT/SIGTERM (the launcher stops every part in order).
   * Miniflare's own handler would otherwise exit the process at once with 130/143.
   */
  callerHandlesSignals?: boolean;
};

export type EdgeHandle = {
  /** `http://127.0.0.1:<port>`, without the base path. */
  url: string;
  miniflare: Miniflare;
  /** Disposes Miniflare, ending its workerd process; safe to call twice. */
  stop(): Promise<void>;
};

/** Starts the edge worker in Miniflare on 127.0.0.1 and resolves once it accepts requests. */
export async function startEdge(params: StartEdgeParams): Promise<EdgeHandle> {
  const wrangler = await readWranglerConfig();
  const script = await bundleEdgeWorker(wrangler.main);
  const onLine = params.onLine ?? ((line: string) => process.stdout.write(`[edge] ${line}\n`));
  const bindings: Record<string, string> = {
    ...wrangler.vars,
    ORIGIN_URL: params.originUrl,
    ...(params.basePath === undefined ? {} : { BASE_PATH: params.basePath }),
    // Locally the secret is a plain binding, as `.dev.vars` gives it to `wrangler dev`.
    ...(params.edgeSharedSecret === undefined ? {} : { EDGE_SHARED_SECRET: params.edgeSharedSecret }),
  };
  const signals = ["SIGINT", "SIGTERM"] as const;
  const listenersBefore = signals.map((signal) => process.listeners(signal));
  const miniflare = new Miniflare({
    name: wrangler.name,
    modules: true,
    script,
    // Names the bundled module in stack traces; the file itself is never read.
    scriptPath: path.resolve(REPO_ROOT, wrangler.main.replace(/\.ts$/, ".js")),
    compatibilityDate: wrangler.compatibilityDate,
    bindings,
    host: "127.0.0.1",
    port: params.port ?? 0,
    handleRuntimeStdio(stdout: Readable, stderr: Readable) {
      for (const stream of [stdout, stderr]) createInterface({ input: stream }).on("line", onLine);
    },
  });
  if (params.callerHandlesSignals) {
    // Miniflare's exit hook adds these listeners (once per process); its "exit" listener stays and
    // still ends workerd if the process exits without stopping the edge.
    signals.forEach((signal, index) => {
      for (const listener of process.listeners(signal)) {
        if (!listenersBefore[index]?.includes(listener)) process.removeListener(signal, listener);
      }
    });
  }
  let ready: URL;
  try {
    ready = await miniflare.ready;
  } catch (error) {
    await miniflare.dispose().catch(() => {});
    throw error;
  }
  let stopped: Promise<void> | undefined;
  return {
    url: ready.origin,
    miniflare,
    stop() {
      stopped ??= miniflare.dispose();
      return stopped;
    },
  };
}
