import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  BODY_DEADLINE_MS,
  HEADER_CLIENT_IP,
  HEADER_EDGE_SECRET,
  HEADER_REGISTRATION,
  HEADER_REGISTRATION_IP,
} from "../shared/constants.ts";
import { sleep } from "../shared/sleep.ts";
import { type EdgeHandle, startTestEdge } from "../testing/edge.ts";
import { type HalfSentAnswer, sendHalfBody } from "../testing/half-sent.ts";
// The origin here is a stand-in whose answers are not the origin's: no OpenAPI check.
import { sendUnchecked as send } from "../testing/http.ts";
import { type OriginStandIn, startOriginStandIn } from "./testing/origin-stand-in.ts";

// The real worker in Miniflare, in front of the origin's place-holder: what a client sees and
// what reaches the origin (docs/api.md, docs/security.md).

const EDGE_SECRET = randomBytes(32).toString("hex");
/** The address fetch connects from: the local edge, like Cloudflare, takes the client from the connection. */
const CLIENT_IP = "127.0.0.1";
const REQUEST_ID = /^req_[0-9a-f]{16}$/;

type OriginAnswer = { status: number; headers: Record<string, string>; body: string };
const CREATED: OriginAnswer = {
  status: 201,
  // The origin's own Cache-Control must not survive: the edge answers no-store whatever it says.
  headers: { "content-type": "application/json", "cache-control": "public, max-age=600" },
  body: JSON.stringify({ token: "agt_stand_in", agent_id: "agent_stand_in", chain_id: 77 }),
};

let origin: OriginStandIn;
let edge: EdgeHandle;
let edgeWithoutSecret: EdgeHandle;
let originAnswer: OriginAnswer = CREATED;

beforeAll(async () => {
  origin = await startOriginStandIn((_request, response) => {
    response.writeHead(originAnswer.status, originAnswer.headers).end(originAnswer.body);
  });
  [edge, edgeWithoutSecret] = await Promise.all([
    startTestEdge({ originUrl: origin.url, edgeSharedSecret: EDGE_SECRET }),
    startTestEdge({ originUrl: origin.url }),
  ]);
});

afterAll(async () => {
  await Promise.all([edge?.stop(), edgeWithoutSecret?.stop()]);
  await origin?.close();
});

beforeEach(() => {
  origin.received.length = 0;
  originAnswer = CREATED;
});

/** A well-formed server-client registration; `null` drops a header. */
function register(target: EdgeHandle, overrides: Record<string, string | null> = {}): Promise<Response> {
  const headers: Record<string, string> = {};
  const merged = {
    "content-type": "application/json",
    [HEADER_REGISTRATION]: "1",
    ...overrides,
  };
  for (const [name, value] of Object.entries(merged)) if (value !== null) headers[name] = value;
  return fetch(`${target.url}/77/agent/v1/register`, { method: "POST", headers, body: "{}" });
}

/** A well-formed registration from a loopback address of its own, which the edge takes as the client's. */
function registerFrom(localAddress: string) {
  return send(`${edge.url}/77/agent/v1/register`, {
    method: "POST",
    headers: { [HEADER_REGISTRATION]: "1" },
    body: "{}",
    localAddress,
  });
}

async function expectRefusal(response: Response, status: number, code: string): Promise<void> {
  expect(response.status).toBe(status);
  expect(response.headers.get("cache-control")).toBe("no-store");
  const body = (await response.json()) as { error: { code: string; message: string; request_id: string } };
  expect(body.error.code).toBe(code);
  expect(body.error.request_id).toMatch(REQUEST_ID);
  expect(response.headers.get("x-request-id")).toBe(body.error.request_id);
}

describe("POST {base}/agent/v1/register through the edge", () => {
  it("forwards with the edge's client IP and secret, and nothing the client spoofed", async () => {
    const response = await register(edge, {
      [HEADER_REGISTRATION_IP]: "198.51.100.1",
      [HEADER_CLIENT_IP]: "198.51.100.6",
      "cf-connecting-ip": "198.51.100.7",
      [HEADER_EDGE_SECRET]: "spoofed-edge-secret",
      "x-forwarded-for": "198.51.100.2",
      "x-real-ip": "198.51.100.3",
      "true-client-ip": "198.51.100.4",
      forwarded: "for=198.51.100.5",
    });

    expect(response.status).toBe(201);
    expect(response.headers.get("cache-control")).toBe("no-store");
    expect(await response.json()).toEqual({
      token: "agt_stand_in",
      agent_id: "agent_stand_in",
      chain_id: 77,
    });

    expect(origin.received).toHaveLength(1);
    const [seen] = origin.received;
    expect(seen).toMatchObject({ method: "POST", url: "/77/agent/v1/register", body: "{}" });
    expect(seen?.headers[HEADER_REGISTRATION_IP]).toBe(CLIENT_IP);
    expect(seen?.headers[HEADER_CLIENT_IP]).toBe(CLIENT_IP);
    expect(seen?.headers[HEADER_EDGE_SECRET]).toBe(EDGE_SECRET);
    expect(seen?.headers["content-type"]).toBe("application/json");
    expect(seen?.headers[HEADER_REGISTRATION]).toBe("1");
    for (const name of ["x-forwarded-for", "x-real-ip", "true-client-ip", "forwarded", "cf-connecting-ip"]) {
      expect(seen?.headers[name], name).toBeUndefined();
    }
    const everything = JSON.stringify(seen?.headers);
    expect(everything).not.toContain("198.51.100.");
    expect(everything).not.toContain("spoofed-edge-secret");
  });

  it("takes the client's address from its connection, never from a client-sent CF-Connecting-IP", async () => {
    for (const from of ["127.0.0.9", "127.0.0.10"]) {
      const response = await send(`${edge.url}/77/agent/v1/register`, {
        method: "POST",
        headers: { [HEADER_REGISTRATION]: "1", "cf-connecting-ip": "81.2.3.4" },
        body: "{}",
        localAddress: from,
      });
      expect(response.status).toBe(201);
    }
    expect(origin.received.map((seen) => seen.headers[HEADER_REGISTRATION_IP])).toEqual([
      "127.0.0.9",
      "127.0.0.10",
    ]);
    expect(origin.received.map((seen) => seen.headers[HEADER_CLIENT_IP])).toEqual([
      "127.0.0.9",
      "127.0.0.10",
    ]);
  });

  it("forwards a same-origin browser registration", async () => {
    const response = await register(edge, { origin: edge.url, "sec-fetch-site": "same-origin" });
    expect(response.status).toBe(201);
    expect(origin.received).toHaveLength(1);
  });

  it("hands the origin's refusal back unchanged but for no-store", async () => {
    originAnswer = {
      status: 429,
      headers: { "content-type": "application/json", "retry-after": "30" },
      body: JSON.stringify({ error: { code: "rate_limited", message: "slow down", request_id: "req_0" } }),
    };
    // From an address of its own: the edge now refuses this one for 30 s (the test below).
    const response = await registerFrom("127.0.0.30");
    expect(response.status).toBe(429);
    expect(response.headers["retry-after"]).toBe("30");
    expect(response.headers["cache-control"]).toBe("no-store");
    expect(response.body).toEqual({
      error: { code: "rate_limited", message: "slow down", request_id: "req_0" },
    });
  });

  it("refuses an address the origin answered 429 itself until the Retry-After is over, forwarding none of its attempts; other addresses go on", async () => {
    originAnswer = {
      status: 429,
      headers: { "content-type": "application/json", "retry-after": "2" },
      body: JSON.stringify({
        error: { code: "registration_rate_limited", message: "m", request_id: "req_0", retry_after: 2 },
      }),
    };
    expect((await registerFrom("127.0.0.31")).status).toBe(429);
    expect(origin.received).toHaveLength(1);
    originAnswer = CREATED;
    const started = Date.now();
    for (let attempt = 0; attempt < 5; attempt++) {
      const refused = await registerFrom("127.0.0.31");
      expect(refused.status).toBe(429);
      expect(refused.headers["cache-control"]).toBe("no-store");
      const seconds = Number(refused.headers["retry-after"]);
      expect(seconds).toBeGreaterThanOrEqual(1);
      expect(seconds).toBeLessThanOrEqual(2);
      expect(refused.body).toEqual({
        error: {
          code: "registration_rate_limited",
          message: "too many registrations; retry later",
          request_id: expect.stringMatching(REQUEST_ID),
          retry_after: seconds,
        },
      });
    }
    expect(origin.received).toHaveLength(1);
    expect((await registerFrom("127.0.0.32")).status).toBe(201);
    expect(origin.received.map((seen) => seen.headers[HEADER_REGISTRATION_IP])).toEqual([
      "127.0.0.31",
      "127.0.0.32",
    ]);
    await sleep(2_000 - (Date.now() - started) + 50);
    expect((await registerFrom("127.0.0.31")).status).toBe(201);
    expect(origin.received).toHaveLength(3);
  });

  it("answers an address it holds refused 429 by the body deadline even when its body never comes", async () => {
    // Mutation: draining the body before the refusal without a deadline (as it did) leaves a client
    // that declared a body and sent one byte of it with no answer at all.
    originAnswer = {
      status: 429,
      headers: { "content-type": "application/json", "retry-after": "30" },
      body: JSON.stringify({
        error: { code: "registration_rate_limited", message: "m", request_id: "req_0", retry_after: 30 },
      }),
    };
    expect((await registerFrom("127.0.0.34")).status).toBe(429);
    originAnswer = CREATED;
    const sentAt = Date.now();
    const stalled = sendHalfBody(`${edge.url}/77/agent/v1/register`, {
      method: "POST",
      headers: { "content-type": "application/json", [HEADER_REGISTRATION]: "1" },
      declaredLength: 200,
      localAddress: "127.0.0.34",
    });
    try {
      const noAnswer = sleep(BODY_DEADLINE_MS + 3_000).then(() => ({ kind: "none" }) as const);
      const answer = await Promise.race([stalled.answer, noAnswer]);
      expect(answer.kind).toBe("answered");
      const answered = answer as Extract<HalfSentAnswer, { kind: "answered" }> & { at: number };
      expect(answered.status).toBe(429);
      expect(JSON.parse(answered.body)).toMatchObject({ error: { code: "registration_rate_limited" } });
      expect(answered.at - sentAt).toBeGreaterThanOrEqual(BODY_DEADLINE_MS - 100);
      expect(origin.received).toHaveLength(1);
    } finally {
      stalled.destroy();
    }
  });

  it("answers a spent day's quota it holds with the origin's wait to the next UTC day, not the minute it keeps it", async () => {
    const hours = 10 * 3600;
    originAnswer = {
      status: 429,
      headers: { "content-type": "application/json", "retry-after": String(hours) },
      body: JSON.stringify({
        error: { code: "registration_rate_limited", message: "m", request_id: "req_0", retry_after: hours },
      }),
    };
    expect((await registerFrom("127.0.0.33")).status).toBe(429);
    originAnswer = CREATED;
    const refused = await registerFrom("127.0.0.33");
    expect(refused.status).toBe(429);
    expect(origin.received).toHaveLength(1);
    // A client that obeys the edge's Retry-After must not come back within the minute to be told
    // the same by the origin: the quota is spent until the day ends.
    const seconds = Number(refused.headers["retry-after"]);
    expect(seconds).toBeGreaterThan(hours - 10);
    expect(seconds).toBeLessThanOrEqual(hours);
    expect(refused.body).toMatchObject({
      error: { code: "registration_rate_limited", retry_after: seconds },
    });
  });

  it.each([
    ["a foreign Origin", () => ({ origin: "https://attacker.example" })],
    ["an opaque Origin", () => ({ origin: "null" })],
    ["a same-site fetch from another origin", () => ({ "sec-fetch-site": "same-site" })],
    ["a cross-site fetch that names the edge", () => ({ origin: edge.url, "sec-fetch-site": "cross-site" })],
  ])("refuses %s with 403 and forwards nothing", async (_case, headers) => {
    await expectRefusal(await register(edge, headers()), 403, "cross_site_refused");
    expect(origin.received).toEqual([]);
  });

  it.each([
    ["no X-SVC-Registration", { [HEADER_REGISTRATION]: null }],
    ["X-SVC-Registration: 0", { [HEADER_REGISTRATION]: "0" }],
    ["no Content-Type", { "content-type": null }],
    ["a form Content-Type", { "content-type": "application/x-www-form-urlencoded" }],
    ["text/plain", { "content-type": "text/plain" }],
  ])("refuses %s with 400 and forwards nothing", async (_case, headers) => {
    await expectRefusal(await register(edge, headers), 400, "validation_failed");
    expect(origin.received).toEqual([]);
  });

  it("accepts application/json with parameters", async () => {
    const response = await register(edge, { "content-type": "application/json; charset=utf-8" });
    expect(response.status).toBe(201);
    expect(origin.received).toHaveLength(1);
  });

  it("refuses with 503 when the edge provider gives no client address, and forwards nothing", async () => {
    // Miniflare's entry fills CF-Connecting-IP from the socket, as Cloudflare does, so the only
    // way to reach the worker without client metadata is to call it directly.
    const worker = await edge.miniflare.getWorker();
    const response = await worker.fetch("http://edge.test/77/agent/v1/register", {
      method: "POST",
      headers: {
        "content-type": "application/json",
        [HEADER_REGISTRATION]: "1",
        "x-forwarded-for": CLIENT_IP,
      },
      body: "{}",
    });
    await expectRefusal(response as unknown as Response, 503, "registration_unavailable");
    expect(origin.received).toEqual([]);
  });

  it("refuses with 503 a client address that is no IP address, and forwards nothing", async () => {
    // Only the edge provider sets CF-Connecting-IP (the local front overwrites a client's copy),
    // so a bad value can reach the worker only by calling it directly.
    const worker = await edge.miniflare.getWorker();
    // Dotted quads whose octet passes 255 are no IPv4 address either (proxy.ts looksLikeIpAddress).
    for (const address of ["unknown", "1.2.3.256", "256.1.2.3", "999.999.999.999"]) {
      const response = await worker.fetch("http://edge.test/77/agent/v1/register", {
        method: "POST",
        headers: {
          "content-type": "application/json",
          [HEADER_REGISTRATION]: "1",
          "cf-connecting-ip": address,
        },
        body: "{}",
      });
      await expectRefusal(response as unknown as Response, 503, "registration_unavailable");
    }
    expect(origin.received).toEqual([]);
  });

  it("refuses with 503 when EDGE_SHARED_SECRET is not configured, and forwards nothing", async () => {
    await expectRefusal(await register(edgeWithoutSecret), 503, "registration_unavailable");
    expect(origin.received).toEqual([]);
  });

  it("answers 404 to any other method, and forwards nothing", async () => {
    const response = await fetch(`${edge.url}/77/agent/v1/register`);
    await expectRefusal(response, 404, "not_found");
    expect(origin.received).toEqual([]);
  });
});
