import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../../testing/free-port.ts";
import { createJsonRpcUpstream } from "./json-rpc-upstream.ts";

type Seen = { url: string | undefined; authorization: string | undefined; body: string };

/** A real HTTP server on loopback whose answer each test chooses by path. */
describe("JSON-RPC upstream client", () => {
  let server: Server;
  let base: string;
  const seen: Seen[] = [];

  beforeAll(async () => {
    server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let body = "";
      req.on("data", (chunk: Buffer) => {
        body += chunk.toString("utf8");
      });
      req.on("end", () => {
        seen.push({ url: req.url, authorization: req.headers.authorization, body });
        if (req.url?.startsWith("/slow")) return; // never answers
        if (req.url?.startsWith("/mixed")) {
          // Each call's method says what it gets: nothing, too much, or its own id back.
          const { id, method } = JSON.parse(body) as { id: number; method: string };
          if (method === "hang") return;
          if (method === "flood") return res.writeHead(200).end(`"${"a".repeat(100_000)}"`);
          return res.writeHead(200).end(JSON.stringify({ jsonrpc: "2.0", id, result: id }));
        }
        if (req.url?.startsWith("/status")) return res.writeHead(502).end("bad gateway");
        if (req.url?.startsWith("/garbage")) return res.writeHead(200).end("{not json");
        if (req.url?.startsWith("/huge")) return res.writeHead(200).end(`"${"a".repeat(100_000)}"`);
        res
          .writeHead(200, { "content-type": "application/json" })
          .end('{"jsonrpc":"2.0","id":1,"result":"0x1"}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  const call = { jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] };

  it("posts to the URL's path and query, with its credentials as basic auth", async () => {
    const url = new URL(`${base}/v3/node?tier=free`);
    url.username = "project";
    url.password = "s3cret/key";
    const upstream = createJsonRpcUpstream({ url: url.toString(), timeoutMs: 2_000 });
    expect(await upstream.send(call)).toEqual({ ok: true, value: { jsonrpc: "2.0", id: 1, result: "0x1" } });
    upstream.close();
    const last = seen.at(-1)!;
    expect(last.url).toBe("/v3/node?tier=free");
    expect(last.authorization).toBe(`Basic ${Buffer.from("project:s3cret/key").toString("base64")}`);
    expect(JSON.parse(last.body)).toEqual(call);
  });

  it("returns failures as data: timeout, bad status, bad body, too large, unreachable", async () => {
    const slow = createJsonRpcUpstream({ url: `${base}/slow`, timeoutMs: 150 });
    const started = performance.now();
    expect(await slow.send(call)).toEqual({ ok: false, error: "timeout" });
    expect(performance.now() - started).toBeLessThan(2_000);
    slow.close();

    const status = createJsonRpcUpstream({ url: `${base}/status`, timeoutMs: 2_000 });
    expect(await status.send(call)).toEqual({ ok: false, error: "bad_status" });
    status.close();

    const garbage = createJsonRpcUpstream({ url: `${base}/garbage`, timeoutMs: 2_000 });
    expect(await garbage.send(call)).toEqual({ ok: false, error: "bad_body" });
    garbage.close();

    const huge = createJsonRpcUpstream({ url: `${base}/huge`, timeoutMs: 2_000, maxResponseBytes: 10_000 });
    expect(await huge.send(call)).toEqual({ ok: false, error: "too_large" });
    huge.close();

    const nobody = createJsonRpcUpstream({ url: `http://127.0.0.1:${await freePort()}`, timeoutMs: 2_000 });
    expect(await nobody.send(call)).toEqual({ ok: false, error: "unreachable" });
    nobody.close();
  });

  it("answers 64 calls at once each with its own answer, before and after calls that timed out or were dropped", async () => {
    const upstream = createJsonRpcUpstream({
      url: `${base}/mixed`,
      timeoutMs: 300,
      maxResponseBytes: 10_000,
    });
    const round = (offset: number) =>
      Promise.all(
        Array.from({ length: 64 }, (_, i) =>
          upstream.send({ jsonrpc: "2.0", id: offset + i, method: "eth_blockNumber", params: [] }),
        ),
      );
    const expected = (offset: number) =>
      Array.from({ length: 64 }, (_, i) => ({
        ok: true,
        value: { jsonrpc: "2.0", id: offset + i, result: offset + i },
      }));
    expect(await round(0)).toEqual(expected(0));
    const [hung, flooded] = await Promise.all([
      upstream.send({ jsonrpc: "2.0", id: 1, method: "hang", params: [] }),
      upstream.send({ jsonrpc: "2.0", id: 2, method: "flood", params: [] }),
    ]);
    expect(hung).toEqual({ ok: false, error: "timeout" });
    expect(flooded).toEqual({ ok: false, error: "too_large" });
    expect(await round(1_000)).toEqual(expected(1_000));
    upstream.close();
  });
});
