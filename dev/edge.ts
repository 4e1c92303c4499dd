/**
 * Runs the edge worker locally in Miniflare (the real workerd), for `npm start` and the edge's
 * tests alike: bundles `main` of wrangler.toml with esbuild, then serves it on a loopback port
 * with wrangler.toml's compatibility date and vars, as `wrangler deploy` would ship them.
 *
 * In front of Miniflare stands a small Node proxy that accepts the client's connection and sets
 * CF-Connecting-IP to the connection's peer address, overwriting any copy the client sent, as
 * Cloudflare does; it also cancels the request when its client leaves, as Cloudflare does. Miniflare
 * itself keeps a client's CF-Connecting-IP (it fills the header only when absent), which would let
 * any local client choose its address at the edge.
 */
import { readFile } from "node:fs/promises";
import {
  Agent,
  type ClientRequest,
  createServer,
  type IncomingMessage,
  request,
  type ServerResponse,
} from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { createInterface } from "node:readline";
import type { Readable } from "node:stream";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";
import { Miniflare } from "miniflare";

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

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
    // Deploy environments (`[env.production]`, …) follow the top level and are wrangler's alone:
    // the local edge is the top level, the local development one.
    if (line.startsWith("[env.")) break;
    if (line === "[vars]") {
      section = vars;
      continue;
    }
    const pair = /^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"([^"\\]*)"\s*(#.*)?$/.exec(line);
    if (!pair?.[1] || pair[2] === undefined) {
      throw new Error(`${path.basename(file)}:${index + 1}: dev/edge.ts reads only key = "string"`);
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
 * import in edge-worker/ fails here instead of at deploy time (docs/architecture.md).
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
   * Also receives every line the worker and the local front log, whatever `onLine` does with it:
   * the test suite passes its secret scan here (testing/edge.ts), so a secret or a token the edge
   * logs fails the run. None by default: `npm start` has nothing to scan its lines for.
   */
  outputSink?: (line: string) => void;
  /**
   * The caller stops the edge itself on SIGINT/SIGTERM (the launcher stops every part in order).
   * Miniflare's own handler would otherwise exit the process at once with 130/143.
   */
  callerHandlesSignals?: boolean;
  /**
   * Also open a socket straight to the edge worker, past Miniflare's own entry worker (which
   * stands in for Cloudflare's front: request.cf, dev routes), as `directUrl`. bench:x402 measures
   * the service through it, since on Cloudflare that front runs on Cloudflare's machines.
   */
  directSocket?: boolean;
  /**
   * EDGE_LOCAL_DEV: true (the default) lets the worker forward to this loopback http origin; false
   * runs it as deployed, where such an origin is a configuration error.
   */
  localDev?: boolean;
};

export type EdgeHandle = {
  /** `http://127.0.0.1:<port>`, without the base path: the Node front, as clients reach the edge. */
  url: string;
  /** Miniflare itself, behind the front (tests call its worker directly to bypass the front). */
  miniflare: Miniflare;
  /** With `directSocket`: the edge worker's own socket, past Miniflare's entry worker. */
  directUrl: URL | undefined;
  /** Disposes Miniflare, ending its workerd process; safe to call twice. */
  stop(): Promise<void>;
};

/** Starts the edge worker in Miniflare on 127.0.0.1 and resolves once it accepts requests. */
export async function startEdge(params: StartEdgeParams): Promise<EdgeHandle> {
  const wrangler = await readWranglerConfig();
  const script = await bundleEdgeWorker(wrangler.main);
  const show = params.onLine ?? ((line: string) => process.stdout.write(`[edge] ${line}\n`));
  const sink = params.outputSink;
  const onLine = (line: string): void => {
    sink?.(line);
    show(line);
  };
  const bindings: Record<string, string> = {
    ...wrangler.vars,
    ...(params.localDev === false ? {} : { EDGE_LOCAL_DEV: "true" }),
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
    port: 0,
    ...(params.directSocket ? { unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }] } : {}),
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
  let directUrl: URL | undefined;
  try {
    ready = await miniflare.ready;
    if (params.directSocket) directUrl = await miniflare.unsafeGetDirectURL();
  } catch (error) {
    await miniflare.dispose().catch(() => {});
    throw error;
  }
  let front: ClientAddressFront;
  try {
    front = await startClientAddressFront(ready, params.port ?? 0, onLine);
  } catch (error) {
    await miniflare.dispose().catch(() => {});
    throw error;
  }
  let stopped: Promise<void> | undefined;
  return {
    url: front.url,
    miniflare,
    directUrl,
    stop() {
      stopped ??= front.close().then(() => miniflare.dispose());
      return stopped;
    },
  };
}

type ClientAddressFront = { url: string; close(): Promise<void> };

/** Connection-scoped headers of one hop, never forwarded (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "upgrade", "te", "trailer"]);

/** Request bodies up to this size can be sent again after a stale kept-alive socket. */
const REPLAY_LIMIT_BYTES = 1 << 20;

/**
 * Listens on 127.0.0.1:`port` and forwards every request to Miniflare at `target`, streaming both
 * ways, with CF-Connecting-IP set from the TCP peer (IPv4-mapped peers as IPv4).
 */
async function startClientAddressFront(
  target: URL,
  port: number,
  onLine: (line: string) => void,
): Promise<ClientAddressFront> {
  const agent = new Agent({ keepAlive: true, maxSockets: 256 });
  const server = createServer((incoming: IncomingMessage, outgoing: ServerResponse) => {
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(incoming.headers)) {
      if (value !== undefined && !HOP_BY_HOP.has(name) && name !== "cf-connecting-ip") headers[name] = value;
    }
    const peer = incoming.socket.remoteAddress ?? "";
    headers["cf-connecting-ip"] = peer.startsWith("::ffff:") ? peer.slice(7) : peer;
    // The request body is kept (up to a bound) as it streams, so a request that met a kept-alive
    // socket Miniflare had just closed can be sent once more on a fresh connection (not another
    // pooled socket, which may have been closed in the same moment): that race is the front's,
    // not the client's, and a client would see a 502 the real edge never gives.
    const sent: Buffer[] = [];
    let sentBytes = 0;
    let replayable = true;
    incoming.on("data", (chunk: Buffer) => {
      sentBytes += chunk.length;
      if (sentBytes > REPLAY_LIMIT_BYTES) replayable = false;
      else sent.push(chunk);
    });
    // A client that goes away takes its request with it, as Cloudflare's front does: the request to
    // Miniflare is cut, so the worker's request to the origin ends too and the origin stops waiting
    // on a body that will never come, or sees its caller gone (a paid demo answer then stays owed to
    // the payer's retry, docs/x402.md#after-settlement_pending-retry-the-same-payment). Cut with a
    // reset: workerd cancels a request whose connection was reset, and its request to the origin
    // with it, but does not notice a plain close once it has the request's whole body, and answers
    // it into the void (origin/x402/payee/payer-leaves-edge.int.test.ts).
    let current: ClientRequest | undefined;
    let clientGone = false;
    outgoing.once("close", () => {
      if (outgoing.writableFinished) return;
      clientGone = true;
      if (current?.socket) current.socket.resetAndDestroy();
      else current?.destroy();
    });
    const forward = (attempt: number): void => {
      const upstream = request(
        {
          hostname: target.hostname,
          port: target.port,
          method: incoming.method,
          path: incoming.url,
          headers,
          // The resend opens its own connection; `agent: false` closes it after the answer.
          agent: attempt === 0 ? agent : false,
        },
        (answer) => {
          const raw: string[] = [];
          for (let i = 0; i < answer.rawHeaders.length; i += 2) {
            if (!HOP_BY_HOP.has(answer.rawHeaders[i]!.toLowerCase()))
              raw.push(answer.rawHeaders[i]!, answer.rawHeaders[i + 1]!);
          }
          outgoing.writeHead(answer.statusCode ?? 502, answer.statusMessage, raw);
          answer.pipe(outgoing);
        },
      );
      current = upstream;
      upstream.on("error", (error: NodeJS.ErrnoException) => {
        // Cut because the client left: no one to answer or resend for.
        if (clientGone) return;
        const staleSocket = upstream.reusedSocket && error.code === "ECONNRESET";
        // The method only, never the URL: a path or query may carry a token (docs/security.md).
        if (staleSocket && attempt === 0 && replayable && !outgoing.headersSent) {
          onLine(`local edge front: a ${incoming.method} request met a closed kept-alive socket; resent`);
          forward(1);
          return;
        }
        const why = `${error.code ?? error.message}${upstream.reusedSocket ? ", kept-alive socket" : ""}${attempt > 0 ? ", resent" : ""}`;
        onLine(`local edge front: a ${incoming.method} request: Miniflare did not answer (${why})`);
        if (!outgoing.headersSent) outgoing.writeHead(502, { "content-type": "text/plain" });
        outgoing.end(`local edge front: Miniflare did not answer (${why})`);
      });
      if (attempt === 0) {
        incoming.pipe(upstream);
        return;
      }
      for (const chunk of sent) upstream.write(chunk);
      if (incoming.readableEnded) upstream.end();
      else incoming.pipe(upstream);
    };
    forward(0);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve());
  });
  const { port: bound } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${bound}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        agent.destroy();
      }),
  };
}
