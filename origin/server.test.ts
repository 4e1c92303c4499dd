import { once } from "node:events";
import { connect, type Socket } from "node:net";
import { Hono } from "hono";
import { afterEach, describe, expect, it } from "vitest";
import { sleep } from "../shared/sleep.ts";
import type { AppEnv } from "./http/env.ts";
import { type RunningServer, startHttpServer } from "./server.ts";

// The drain on real loopback sockets, spoken to in raw HTTP/1.1 so each connection's fate shows.

/** A route whose answer waits until the test lets it go. */
function appWithGate(): { app: Hono<AppEnv>; entered: Promise<void>; release(): void } {
  let release!: () => void;
  let entered!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const inside = new Promise<void>((resolve) => (entered = resolve));
  const app = new Hono<AppEnv>();
  app.get("/quick", (c) => c.json({ ok: true }));
  app.get("/slow", async (c) => {
    entered();
    await gate;
    return c.json({ ok: true });
  });
  return { app, entered: inside, release };
}

/** Everything the server sends on `socket` until it closes the connection. */
async function readUntilClosed(socket: Socket): Promise<string> {
  const chunks: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => chunks.push(chunk));
  await Promise.race([once(socket, "close"), once(socket, "error")]);
  return Buffer.concat(chunks).toString("utf8");
}

const request = (path: string): string => `GET ${path} HTTP/1.1\r\nHost: origin\r\n\r\n`;

describe("startHttpServer's drain (close)", () => {
  let server: RunningServer | undefined;
  afterEach(async () => {
    await server?.close(0);
    server = undefined;
  });

  // What the drain relies on Node for: close leaves a connection it has accepted but not yet read
  // to be answered (only kept-alive connections between requests count as idle).
  it("answers a request that arrives after close on a connection accepted before it", async () => {
    const { app } = appWithGate();
    server = await startHttpServer(app, "127.0.0.1", 0);
    const socket = connect(server.port, "127.0.0.1");
    await once(socket, "connect");
    await sleep(50); // accepted by now: the server's loop has polled its listener since
    const closed = server.close(30_000);
    socket.write(request("/quick"));
    const answer = await readUntilClosed(socket);
    expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(answer.toLowerCase()).toContain("connection: close");
    expect(answer).toContain('{"ok":true}');
    await closed;
  });

  it("finishes a request in flight at close and ends its connection after the answer", async () => {
    const { app, entered, release } = appWithGate();
    server = await startHttpServer(app, "127.0.0.1", 0);
    const socket = connect(server.port, "127.0.0.1");
    await once(socket, "connect");
    const answer = readUntilClosed(socket);
    socket.write(request("/slow"));
    await entered;
    let closedAt: number | undefined;
    const closed = server.close(30_000).then(() => (closedAt = Date.now()));
    await sleep(100);
    expect(closedAt, "close waits for the request in flight").toBeUndefined();
    release();
    const text = await answer;
    expect(text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    expect(text.toLowerCase()).toContain("connection: close");
    await closed;
  });

  it("lets go of a kept-alive client that keeps sending: its next answer closes the connection", async () => {
    const { app } = appWithGate();
    server = await startHttpServer(app, "127.0.0.1", 0);
    const socket = connect(server.port, "127.0.0.1");
    await once(socket, "connect");
    let text = "";
    socket.on("data", (chunk: Buffer) => {
      text += chunk.toString("utf8");
      // One request after another on the one connection, as a pooled client sends them.
      if (text.endsWith('{"ok":true}') && !socket.destroyed) socket.write(request("/quick"));
    });
    const ended = Promise.race([once(socket, "close"), once(socket, "error")]);
    socket.write(request("/quick"));
    while (!text) await sleep(5);
    const started = Date.now();
    await server.close(30_000);
    await ended;
    expect(Date.now() - started, "close let the busy connection go").toBeLessThan(5_000);
    const answers = text.split("HTTP/1.1 ").slice(1);
    expect(answers.every((answer) => answer.startsWith("200 OK"))).toBe(true);
    expect(answers.at(-1)!.toLowerCase()).toContain("connection: close");
  });
});

describe("startHttpServer's receive timeouts", () => {
  let server: RunningServer | undefined;
  afterEach(async () => {
    await server?.close(0);
    server = undefined;
  });
  const short = { headersTimeout: 300, requestTimeout: 600, connectionsCheckingInterval: 50 };

  it("answers headers that stop coming with 408 request_timeout in the error envelope, and closes", async () => {
    const { app } = appWithGate();
    server = await startHttpServer(app, "127.0.0.1", 0, undefined, short);
    const socket = connect(server.port, "127.0.0.1");
    await once(socket, "connect");
    const answer = readUntilClosed(socket);
    socket.write("GET /quick HTTP/1.1\r\nHost: origin\r\n"); // and never the blank line
    const text = await answer;
    expect(text).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(text.toLowerCase()).toContain("connection: close");
    expect(JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4))).toMatchObject({
      error: { code: "request_timeout", request_id: expect.stringMatching(/^req_/) },
    });
  });

  it("bounds receiving only: an answer that takes longer than the timeouts is still given", async () => {
    const { app, entered, release } = appWithGate();
    server = await startHttpServer(app, "127.0.0.1", 0, undefined, short);
    const socket = connect(server.port, "127.0.0.1");
    await once(socket, "connect");
    const answer = readUntilClosed(socket);
    socket.write(request("/slow"));
    await entered;
    await sleep(1_000); // past both timeouts
    release();
    await sleep(50);
    socket.end();
    expect(await answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
  });
});
