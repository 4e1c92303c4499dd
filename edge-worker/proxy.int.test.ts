import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { buildOpenApiDocument } from "../origin/openapi/document.ts";
import {
  HEADER_CLIENT_IP,
  HEADER_EDGE_SECRET,
  HEADER_LOCKOUT_LANE,
  HEADER_REGISTRATION,
  HEADER_REGISTRATION_IP,
  HEADER_REQUEST_URL,
} from "../shared/constants.ts";
import { type EdgeHandle, startTestEdge } from "../testing/edge.ts";
import { freePort } from "../testing/free-port.ts";
import { sendUnchecked } from "../testing/http.ts";
import { sharedResponseChecker } from "../testing/openapi-check.ts";
import { type OriginStandIn, startOriginStandIn } from "./testing/origin-stand-in.ts";

// The real worker in Miniflare, in front of the origin's place-holder: pass-through routes, the
// routes the edge never opens, and an unreachable origin (docs/architecture.md).

const EDGE_SECRET = "s".repeat(64);
const REQUEST_ID = /^req_[0-9a-f]{16}$/;
const QUOTE = {
  x402Version: 2,
  error: "payment required",
  accepts: [{ scheme: "exact", network: "eip155:77" }],
};

let origin: OriginStandIn;
let edge: EdgeHandle;
let edgeToNowhere: EdgeHandle;
/** Lets the streaming route finish; replaced per test. */
let releaseStream: () => void = () => {};

beforeAll(async () => {
  origin = await startOriginStandIn((request, response) => {
    const path = request.url.split("?")[0];
    if (request.method === "TRACE") {
      // Stands in for a proxy before the origin that answers TRACE itself by echoing the request
      // (Apache's default, TraceEnable On): the origin's own routes answer TRACE with a 404.
      const head = Object.entries(request.headers).map(([name, value]) => `${name}: ${value}`);
      response
        .writeHead(200, { "content-type": "message/http" })
        .end([`TRACE ${request.url} HTTP/1.1`, ...head].join("\r\n"));
    } else if (path === "/77/agent/v1/network") {
      response
        .writeHead(200, {
          "content-type": "application/json",
          "x-request-id": "req_00000000000000aa",
          "x-origin-marker": "stand-in",
        })
        .end(JSON.stringify({ api_version: "v1", chain: { chain_id: 77 } }));
    } else if (path === "/77/agent/v1/rpc") {
      response
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ jsonrpc: "2.0", id: 1, result: "0x2a", echoed_bytes: request.body.length }));
    } else if (path === "/77/x402/demo") {
      const quote = JSON.stringify(QUOTE);
      response
        .writeHead(402, {
          "content-type": "application/json",
          "payment-required": Buffer.from(quote).toString("base64"),
        })
        .end(quote);
    } else if (path === "/77/agent/v1/stream-probe") {
      response.writeHead(200, { "content-type": "application/octet-stream" });
      response.write("first;");
      releaseStream = () => response.end("second");
    } else if (path === "/77/x402/moved") {
      response.writeHead(302, { location: "/77/x402/demo" }).end();
    } else {
      response.writeHead(404, { "content-type": "text/plain" }).end("stand-in: no such route");
    }
  });
  const nowhere = `http://127.0.0.1:${await freePort()}`;
  [edge, edgeToNowhere] = await Promise.all([
    startTestEdge({ originUrl: origin.url, edgeSharedSecret: EDGE_SECRET, directSocket: true }),
    startTestEdge({ originUrl: nowhere, edgeSharedSecret: EDGE_SECRET }),
  ]);
});

afterAll(async () => {
  releaseStream();
  await Promise.all([edge?.stop(), edgeToNowhere?.stop()]);
  await origin?.close();
});

beforeEach(() => {
  origin.received.length = 0;
});

type Envelope = { error: { code: string; message: string; request_id: string } };

describe("pass-through routes", () => {
  it("GET /agent/v1/network: method, path, query and headers reach the origin; its answer comes back", async () => {
    const response = await fetch(`${edge.url}/77/agent/v1/network?verbose=1&x=%2F`, {
      headers: {
        authorization: "Bearer agt_test",
        "x-client-note": "kept",
        "x-forwarded-for": "198.51.100.9",
        "cf-connecting-ip": "198.51.100.10",
        [HEADER_CLIENT_IP]: "198.51.100.11",
      },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("x-request-id")).toBe("req_00000000000000aa");
    expect(response.headers.get("x-origin-marker")).toBe("stand-in");
    expect(response.headers.get("content-type")).toBe("application/json");
    expect(await response.json()).toEqual({ api_version: "v1", chain: { chain_id: 77 } });

    expect(origin.received).toHaveLength(1);
    const [seen] = origin.received;
    expect(seen).toMatchObject({ method: "GET", url: "/77/agent/v1/network?verbose=1&x=%2F", body: "" });
    expect(seen?.headers.authorization).toBe("Bearer agt_test");
    expect(seen?.headers["x-client-note"]).toBe("kept");
    // The client's address is the edge's to say (docs/security.md): from the connection, with the secret.
    expect(seen?.headers["x-forwarded-for"]).toBeUndefined();
    expect(seen?.headers["cf-connecting-ip"]).toBeUndefined();
    expect(seen?.headers[HEADER_CLIENT_IP]).toBe("127.0.0.1");
    expect(seen?.headers[HEADER_EDGE_SECRET]).toBe(EDGE_SECRET);
  });

  it("POST /agent/v1/rpc: the body reaches the origin byte for byte", async () => {
    const body = JSON.stringify([
      { jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] },
      {
        jsonrpc: "2.0",
        id: 2,
        method: "eth_getBalance",
        params: ["0x00000000000000000000000000000000000000aa", "latest"],
      },
    ]);
    const response = await fetch(`${edge.url}/77/agent/v1/rpc`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer agt_test" },
      body,
    });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      jsonrpc: "2.0",
      id: 1,
      result: "0x2a",
      echoed_bytes: body.length,
    });
    expect(origin.received).toHaveLength(1);
    expect(origin.received[0]).toMatchObject({ method: "POST", url: "/77/agent/v1/rpc", body });
    expect(origin.received[0]?.headers["content-type"]).toBe("application/json");
  });

  it("GET /x402/demo: a 402 with its PAYMENT-REQUIRED header and body comes back intact", async () => {
    const response = await fetch(`${edge.url}/77/x402/demo`);
    expect(response.status).toBe(402);
    const header = response.headers.get("payment-required");
    expect(JSON.parse(Buffer.from(header ?? "", "base64").toString("utf8"))).toEqual(QUOTE);
    expect(await response.json()).toEqual(QUOTE);
    expect(origin.received.map((r) => r.url)).toEqual(["/77/x402/demo"]);
  });

  it("tells the origin the URL the client requested, in place of any copy the client sent", async () => {
    const response = await fetch(`${edge.url}/77/x402/demo?x=1`, {
      headers: { [HEADER_REQUEST_URL]: "https://evil.example/77/x402/demo" },
    });
    expect(response.status).toBe(402);
    expect(origin.received.map((r) => r.headers[HEADER_REQUEST_URL])).toEqual([
      `${edge.url}/77/x402/demo?x=1`,
    ]);
    // On the worker's own socket too: the URL as requested there.
    await fetch(`${edge.directUrl}77/x402/demo`, { headers: { "cf-connecting-ip": "203.0.113.7" } });
    expect(origin.received[1]?.headers[HEADER_REQUEST_URL]).toBe(`${edge.directUrl}77/x402/demo`);
  });

  it("on the worker's direct socket (bench:x402's way in), the same worker answers, taking CF-Connecting-IP as the client", async () => {
    const response = await fetch(`${edge.directUrl}77/x402/demo`, {
      headers: { "cf-connecting-ip": "203.0.113.7" },
    });
    expect(response.status).toBe(402);
    expect(await response.json()).toEqual(QUOTE);
    expect(origin.received.map((r) => [r.url, r.headers[HEADER_CLIENT_IP]])).toEqual([
      ["/77/x402/demo", "203.0.113.7"],
    ]);
  });

  it("streams the origin's answer: the first part arrives before the origin has finished", async () => {
    const response = await fetch(`${edge.url}/77/agent/v1/stream-probe`);
    expect(response.status).toBe(200);
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = "";
    const readFirstPart = async (): Promise<string> => {
      while (!text.includes("first;")) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
      return text;
    };
    // An edge that buffered would hold the first part until the origin ends, which it never does
    // until released below.
    const buffered = new Promise<string>((resolve) =>
      setTimeout(() => resolve("still buffered"), 3_000).unref(),
    );
    expect(await Promise.race([readFirstPart(), buffered])).toBe("first;");
    releaseStream();
    for (let part = await reader.read(); !part.done; part = await reader.read()) {
      text += decoder.decode(part.value, { stream: true });
    }
    expect(text).toBe("first;second");
  });

  it("hands a redirect back to the client instead of following it", async () => {
    const response = await fetch(`${edge.url}/77/x402/moved`, { redirect: "manual" });
    expect(response.status).toBe(302);
    expect(response.headers.get("location")).toBe("/77/x402/demo");
    expect(origin.received.map((r) => r.url)).toEqual(["/77/x402/moved"]);
  });

  it("never lets a client's edge secret, client IP, registration IP or lockout lane through, even on a path like register's", async () => {
    for (const path of ["/77/agent/v1/network", "/77/agent/v1/register/"]) {
      await fetch(`${edge.url}${path}`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          [HEADER_REGISTRATION]: "1",
          [HEADER_EDGE_SECRET]: "spoofed-edge-secret",
          [HEADER_REGISTRATION_IP]: "198.51.100.1",
          [HEADER_CLIENT_IP]: "198.51.100.2",
          [HEADER_LOCKOUT_LANE]: "come_back",
        },
        body: "{}",
      });
    }
    expect(origin.received.map((r) => r.url)).toEqual(["/77/agent/v1/network", "/77/agent/v1/register/"]);
    for (const seen of origin.received) {
      expect(seen.headers[HEADER_EDGE_SECRET]).toBe(EDGE_SECRET);
      expect(seen.headers[HEADER_CLIENT_IP]).toBe("127.0.0.1");
      expect(seen.headers[HEADER_REGISTRATION_IP]).toBeUndefined();
      expect(seen.headers[HEADER_LOCKOUT_LANE]).toBeUndefined();
    }
  });
});

describe("routes the edge never opens", () => {
  it.each([
    ["GET", "/77/admin/agents"],
    ["GET", "/77/admin/agents/registration"],
    ["POST", "/77/admin/agents/registration/settings"],
    ["POST", "/77/admin/agents/registration/identity"],
    ["GET", "/77/admin/agents/audit"],
    ["GET", "/77/admin/agents/assets/console.js"],
    ["GET", "/77/metrics"],
    ["GET", "/77/admin"],
    ["GET", "/77/healthz"],
    ["GET", "/77/"],
    ["GET", "/77/faucet"],
    ["GET", "/78/agent/v1/network"],
    ["GET", "/agent/v1/network"],
  ])("%s %s is a 404 made at the edge", async (method, path) => {
    const response = await fetch(`${edge.url}${path}`, {
      method,
      headers: { "x-admin-api-token": "a".repeat(64), "content-type": "application/json" },
      ...(method === "POST" ? { body: "{}" } : {}),
    });
    expect(response.status).toBe(404);
    const body = (await response.json()) as Envelope;
    expect(body.error.code).toBe("not_found");
    expect(body.error.request_id).toMatch(REQUEST_ID);
    expect(origin.received).toEqual([]);
  });
});

describe("a path outside the base path", () => {
  // A base URL without its /77 (AGENT_BASE_URL=http://127.0.0.1:8787, the edge's address as
  // `npm start` prints it first) had every command answered "no such route", saying nothing of why.
  it("is a 404 that says every route is under the base path; one under it is the plain 404", async () => {
    const outside = await fetch(`${edge.url}/agent/v1/balance`, {
      headers: { authorization: `Bearer agt_${"0".repeat(32)}_${"0".repeat(64)}` },
    });
    expect(outside.status).toBe(404);
    expect(((await outside.json()) as Envelope).error.message).toBe(
      "no such route: every route of this service is under /77, so a base URL ends in /77",
    );
    const inside = await fetch(`${edge.url}/77/faucet`);
    expect(inside.status).toBe(404);
    expect(((await inside.json()) as Envelope).error.message).toBe("no such route");
    expect(origin.received).toEqual([]);
  });
});

describe("methods the edge never forwards", () => {
  // (TRACK and CONNECT never reach the worker: the local front's parser and workerd refuse them.)
  it("TRACE is a 404 made at the edge: no hop on the way echoes the edge secret back", async () => {
    const answers: string[] = [];
    for (const entry of [edge.url, edge.directUrl!.origin]) {
      for (const method of ["TRACE"]) {
        for (const path of ["/77/x402/demo", "/77/agent/v1/network", "/77/.well-known/webhooks/keys"]) {
          const response = await sendUnchecked(`${entry}${path}`, {
            method,
            headers: { "cf-connecting-ip": "203.0.113.7" },
          });
          answers.push(`${method} ${entry}${path} → ${response.status} ${JSON.stringify(response.body)}`);
          expect(JSON.stringify(response.body), answers.at(-1)).not.toContain(EDGE_SECRET);
          expect(response.status, answers.at(-1)).toBe(404);
          expect((response.body as Envelope).error.code).toBe("not_found");
        }
      }
    }
    expect(origin.received.map((r) => `${r.method} ${r.url}`)).toEqual([]);
  });
});

describe("an unreachable origin", () => {
  it("is a 502 upstream_unavailable on pass-through", async () => {
    const response = await fetch(`${edgeToNowhere.url}/77/agent/v1/network`);
    expect(response.status).toBe(502);
    const body = (await response.json()) as Envelope;
    expect(body.error.code).toBe("upstream_unavailable");
    expect(body.error.request_id).toMatch(REQUEST_ID);
  });

  it("is a 502 with no-store on register", async () => {
    const response = await fetch(`${edgeToNowhere.url}/77/agent/v1/register`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        [HEADER_REGISTRATION]: "1",
        "cf-connecting-ip": "203.0.113.7",
      },
      body: "{}",
    });
    expect(response.status).toBe(502);
    expect(response.headers.get("cache-control")).toBe("no-store");
    expect(((await response.json()) as Envelope).error.code).toBe("upstream_unavailable");
  });

  it("is a 502 upstream_unavailable on every route of the public document, which declares it", async () => {
    // A client generated from the served document meets this answer on any route while the
    // origin is out of the edge's reach: each operation must name it.
    const document = buildOpenApiDocument("/77", "public");
    const problems: string[] = [];
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const method of Object.keys(methods)) {
        const url = `${edgeToNowhere.url}/77${path.replace(/\{[a-z_]+\}/g, "x")}`;
        const response = await fetch(url, {
          method: method.toUpperCase(),
          headers: {
            "content-type": "application/json",
            [HEADER_REGISTRATION]: "1",
            "cf-connecting-ip": "203.0.113.7",
          },
          ...(method === "get" ? {} : { body: "{}" }),
        });
        const body = (await response.json()) as Envelope;
        expect([response.status, body.error.code], `${method} ${path}`).toEqual([
          502,
          "upstream_unavailable",
        ]);
        problems.push(
          ...sharedResponseChecker().check({
            method,
            url,
            status: response.status,
            contentType: response.headers.get("content-type") ?? undefined,
            body,
            headers: response.headers,
          }),
        );
      }
    }
    expect(problems).toEqual([]);
  });
});
