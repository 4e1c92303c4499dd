import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EdgeHandle, startTestEdge } from "../testing/edge.ts";
import { runTool } from "../testing/run-tool.ts";
import { parseEdgeConfig } from "./config.ts";
import { type OriginStandIn, startOriginStandIn } from "./testing/origin-stand-in.ts";

// The worker as deployed (no EDGE_LOCAL_DEV) once forwarded to a loopback origin over plain http,
// and took a secret under 32 bytes as unset (every registration then 503 with no hint). Both are
// now configuration errors: every request is refused, nothing is forwarded, and the log names the
// variable.

describe("the edge worker outside local development (Miniflare)", () => {
  let origin: OriginStandIn;
  const edges: EdgeHandle[] = [];
  const lines: string[] = [];

  beforeAll(async () => {
    origin = await startOriginStandIn((_request, response) => {
      response.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  afterAll(async () => {
    for (const edge of edges) await edge.stop();
    await origin?.close();
  });

  const start = async (params: { localDev: boolean; secret: string }): Promise<EdgeHandle> => {
    const edge = await startTestEdge({
      originUrl: origin.url,
      edgeSharedSecret: params.secret,
      localDev: params.localDev,
      onLine: (line) => lines.push(line),
    });
    edges.push(edge);
    return edge;
  };

  it("refuses a loopback http origin: 503 to every request, nothing forwarded, the problem logged", async () => {
    const edge = await start({ localDev: false, secret: "s".repeat(32) });
    for (const route of ["/77/agent/v1/network", "/77/x402/demo"]) {
      const response = await fetch(`${edge.url}${route}`);
      expect(response.status).toBe(503);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe("service_unavailable");
    }
    expect(origin.received).toEqual([]);
    expect(lines.join("\n")).toContain("ORIGIN_URL must be https:// outside local development");
  });

  it("wrangler.toml's production environment builds (wrangler deploy --dry-run) and its vars pass the worker's checks", async () => {
    const outdir = await mkdtemp(path.join(tmpdir(), "edge-dry-run-"));
    try {
      const wrangler = await runTool(
        "node_modules/wrangler/bin/wrangler.js",
        ["deploy", "--dry-run", "--env", "production", "--outdir", outdir],
        { env: { WRANGLER_SEND_METRICS: "false" }, timeoutMs: 120_000 },
      );
      const built = { code: wrangler.code, output: `${wrangler.stdout}\n${wrangler.stderr}` };
      expect(built.output).toContain("--dry-run: exiting now.");
      expect(built.code).toBe(0);
      const vars = /env\.ORIGIN_URL \("([^"]+)"\)/.exec(built.output)?.[1];
      const basePath = /env\.BASE_PATH \("([^"]+)"\)/.exec(built.output)?.[1];
      expect(vars).toMatch(/^https:\/\//);
      // What the deployed worker will parse, with its secret set: no configuration error.
      const parsed = parseEdgeConfig({
        ORIGIN_URL: vars,
        BASE_PATH: basePath,
        EDGE_SHARED_SECRET: "s".repeat(32),
      });
      expect(parsed.ok ? [] : parsed.error).toEqual([]);
    } finally {
      await rm(outdir, { recursive: true, force: true });
    }
  }, 150_000);

  it("refuses a secret under 32 bytes as a configuration error, even locally", async () => {
    lines.length = 0;
    const edge = await start({ localDev: true, secret: "short-edge-secret" });
    const response = await fetch(`${edge.url}/77/agent/v1/network`);
    expect(response.status).toBe(503);
    expect(origin.received).toEqual([]);
    expect(lines.join("\n")).toContain("EDGE_SHARED_SECRET is shorter than 32 bytes");
    expect(lines.join("\n")).not.toContain("short-edge-secret");
  });

  it("answers a plain http request 400, whatever its route, and serves the same routes over https", async () => {
    // As deployed: an https origin that is not loopback (one nobody answers for: a request that
    // gets that far is 502), so the worker's configuration is good and every route is live.
    const edge = await startTestEdge({
      originUrl: "https://origin.invalid",
      edgeSharedSecret: "s".repeat(32),
      localDev: false,
      onLine: () => {},
    });
    edges.push(edge);
    const token = `agt_${"a".repeat(32)}_${"b".repeat(64)}`;
    type Sent = { method?: string; headers?: Record<string, string>; body?: string };
    const requests: Array<[string, Sent]> = [
      ["/77/agent/v1/balance", { headers: { authorization: `Bearer ${token}` } }],
      [
        "/77/agent/v1/register",
        {
          method: "POST",
          headers: { "content-type": "application/json", "x-svc-registration": "1" },
          body: "{}",
        },
      ],
      ["/77/x402/demo", {}],
    ];
    for (const [route, init] of requests) {
      // Through the local front, as a client on plain http reaches the worker.
      const plain = await fetch(`${edge.url}${route}`, init);
      expect(plain.status, route).toBe(400);
      const body = (await plain.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe("validation_failed");
      expect(body.error.message).toMatch(/^use https: /);
      expect(plain.headers.get("cache-control")).toBe("no-store");
      // The same request over https is served: it reaches the proxy, whose origin does not answer.
      const secure = await edge.miniflare.dispatchFetch(`https://wallet.example.com${route}`, init);
      expect(secure.status, route).toBe(502);
      expect(((await secure.json()) as { error: { code: string } }).error.code).toBe("upstream_unavailable");
    }
  });
});
