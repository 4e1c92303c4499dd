import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { answerCutAfterHeaders } from "../testing/cut-body.ts";
import { freePort } from "../testing/free-port.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { nodeFetch } from "./node-fetch.ts";

// The CLI's requests over node:http (node-fetch.ts), against a real server on loopback: what the
// client reads of an answer, and redirects followed as fetch follows them.

type Seen = { method: string; url: string; headers: IncomingMessage["headers"]; body: string };

describe("nodeFetch", () => {
  let server: Server;
  let base: string;
  const seen: Seen[] = [];

  beforeAll(async () => {
    server = createServer((request, response) => {
      let body = "";
      request.on("data", (chunk: Buffer) => {
        body += chunk.toString();
      });
      request.on("end", () => {
        seen.push({ method: request.method!, url: request.url!, headers: request.headers, body });
        if (request.url!.startsWith("/redirect-to?")) {
          const location = new URL(request.url!, "http://x").searchParams.get("location")!;
          response.writeHead(307, { location });
          response.end();
          return;
        }
        const to = /^\/redirect\/(\d+)$/.exec(request.url!);
        if (to) {
          response.writeHead(Number(to[1]), { location: "/landed" });
          response.end();
          return;
        }
        response.writeHead(request.url === "/missing" ? 404 : 200, {
          "content-type": "application/json",
          "retry-after": "7",
        });
        response.end(JSON.stringify({ method: request.method, body }));
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it("sends the method, headers (a record or a Headers object) and body; answers status, ok, headers, text and json", async () => {
    const answer = await nodeFetch(`${base}/x?q=1`, {
      method: "POST",
      headers: { Authorization: "Bearer t", "content-type": "application/json" },
      body: '{"a":1}',
    });
    expect([answer.status, answer.ok, answer.headers.get("Retry-After")]).toEqual([200, true, "7"]);
    expect(await answer.json()).toEqual({ method: "POST", body: '{"a":1}' });
    expect(seen.at(-1)).toMatchObject({
      url: "/x?q=1",
      headers: { authorization: "Bearer t", "content-length": "7" },
    });
    const missing = await nodeFetch(new URL(`${base}/missing`), { headers: new Headers({ "X-One": "1" }) });
    expect([missing.status, missing.ok, missing.headers.get("x-absent")]).toEqual([404, false, null]);
    expect(await missing.text()).toBe('{"method":"GET","body":""}');
    expect(seen.at(-1)?.headers["x-one"]).toBe("1");
  });

  // Mutation: returning the redirect itself (no following) fails this.
  it("follows redirects as fetch does: 303 goes on as a GET without the body, 307 keeps the POST and its body", async () => {
    const seeOther = await nodeFetch(`${base}/redirect/303`, { method: "POST", body: "paid" });
    expect(await seeOther.json()).toEqual({ method: "GET", body: "" });
    const temporary = await nodeFetch(`${base}/redirect/307`, { method: "POST", body: "paid" });
    expect(await temporary.json()).toEqual({ method: "POST", body: "paid" });
  });

  // The token must not follow a redirect to another host: fetch drops Authorization there too.
  it("sends the Authorization header on to a redirect within the origin only, as fetch does", async () => {
    const other = createServer((request, response) => {
      seen.push({ method: request.method!, url: request.url!, headers: request.headers, body: "" });
      response.writeHead(200, { "content-type": "application/json" });
      response.end("{}");
    });
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    const elsewhere = `http://127.0.0.1:${(other.address() as AddressInfo).port}/landed-elsewhere`;
    try {
      const away = await nodeFetch(`${base}/redirect-to?${new URLSearchParams({ location: elsewhere })}`, {
        headers: { authorization: "Bearer agt_secret" },
      });
      expect(away.status).toBe(200);
      expect(seen.at(-1)).toMatchObject({ url: "/landed-elsewhere" });
      expect(seen.at(-1)?.headers.authorization).toBeUndefined();

      const within = await nodeFetch(`${base}/redirect/307`, {
        headers: { authorization: "Bearer agt_secret" },
      });
      expect(within.status).toBe(200);
      expect(seen.at(-1)).toMatchObject({ url: "/landed", headers: { authorization: "Bearer agt_secret" } });
    } finally {
      await new Promise((resolve) => other.close(resolve));
    }
  });

  it("rejects with a TypeError when nothing answers, as fetch does", async () => {
    const port = await freePort();
    await expect(nodeFetch(`http://127.0.0.1:${port}/`)).rejects.toBeInstanceOf(TypeError);
  });

  // Mutation: rejecting the request when the body stops (as before) loses the headers: a paid
  // answer's PAYMENT-RESPONSE, the transaction the agent paid in, never reached the CLI.
  it("answers the status and headers of an answer cut off after them, its text and json rejecting, as fetch does", async () => {
    const cut = await startLoopbackServer(async (_request, response) => {
      answerCutAfterHeaders(response, 200, { "payment-response": "c2V0dGxlZA==" }, '{"partial":');
    });
    try {
      const answer = await nodeFetch(`${cut.url}/paid`);
      expect([answer.status, answer.headers.get("PAYMENT-RESPONSE")]).toEqual([200, "c2V0dGxlZA=="]);
      await expect(answer.text()).rejects.toMatchObject({ code: "ECONNRESET" });
      await expect(answer.json()).rejects.toMatchObject({ code: "ECONNRESET" });
    } finally {
      await cut.close();
    }
  });
});
