import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { sleep } from "../../shared/sleep.ts";
import { sharedLookups, systemResolve } from "./address-guard.ts";
import { sendWebhook } from "./send.ts";

// One attempt against a real receiver on loopback: once the status is known, the rest of the
// answer is bounded in time (the attempt's timeout) and in bytes, and the connection is cut
// (docs/operations.md#webhooks: a receiver that hangs costs nothing more).

const TIMEOUT_MS = 500;

type Receiver = { url: string; open(): number; close(): Promise<void> };

/** A receiver whose handler writes the status and what it likes of a body, and never ends it. */
async function receiver(write: (response: ServerResponse) => void): Promise<Receiver> {
  const sockets = new Set<Socket>();
  const server = createServer((request, response) => {
    request.resume();
    response.writeHead(200, { "content-type": "text/plain" });
    write(response);
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    open: () => sockets.size,
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const send = (url: string) =>
  sendWebhook({ url, headers: {}, body: "{}", timeoutMs: TIMEOUT_MS, allowPrivate: true });

/** Polls every 10 ms until the receiver has no connection open; how long that took. */
async function untilClosed(target: Receiver, ms: number): Promise<number> {
  const started = Date.now();
  while (target.open() > 0) {
    if (Date.now() - started > ms) throw new Error(`${target.open()} connections still open after ${ms} ms`);
    await sleep(10);
  }
  return Date.now() - started;
}

describe("sendWebhook against an answer whose body never ends", () => {
  let receivers: Receiver[] = [];
  afterEach(async () => {
    for (const each of receivers) await each.close();
    receivers = [];
  });

  it("answers with the status at once and cuts the connection at the timeout", async () => {
    const target = await receiver((response) => response.write("ok"));
    receivers.push(target);
    const started = Date.now();
    expect(await send(target.url)).toEqual({ ok: true, status: 200, retryAfter: undefined });
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS);
    expect(target.open()).toBe(1);
    await untilClosed(target, TIMEOUT_MS + 500);
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
  });

  it("cuts one that streams without end once it passed 64 KiB, long before the timeout", async () => {
    let written = 0;
    const target = await receiver((response) => {
      const more = (): void => {
        // 16 KiB at a time, as fast as the socket takes them, until the origin cuts it.
        while (!response.destroyed && response.write(Buffer.alloc(16 * 1024, 0x61))) written += 16 * 1024;
        if (!response.destroyed) response.once("drain", more);
      };
      response.on("error", () => {});
      more();
    });
    receivers.push(target);
    expect(await send(target.url)).toMatchObject({ ok: true, status: 200 });
    expect(await untilClosed(target, TIMEOUT_MS - 100)).toBeLessThan(TIMEOUT_MS - 100);
    // Loopback buffers hold some on top of what was read; far from what TIMEOUT_MS of it would be.
    expect(written).toBeLessThan(16 * 1024 * 1024);
  });
});

describe("sendWebhook's timeout counts the name's lookup", () => {
  // A fake resolver (named as one): a system resolver that hangs cannot be made on this
  // loopback-only machine, and sendWebhook takes the resolver its tests give it. Private addresses
  // are refused, as in production, so the name is looked up before the request as well as by it.
  const PUBLIC_ADDRESS = "93.184.216.34";
  const sendVia = (url: string, resolve: (hostname: string) => Promise<string[]>) =>
    sendWebhook({ url, headers: {}, body: "{}", timeoutMs: TIMEOUT_MS, allowPrivate: false, resolve });
  const never = () => new Promise<string[]>(() => {});

  it("ends at the timeout when the lookup never answers", async () => {
    // Mutation: the check's lookup awaited outside the deadline never ends here (the test's own timeout).
    const started = Date.now();
    const result = await sendVia("http://hangs.example/hook", never);
    expect(result).toEqual({ ok: false, error: `timeout: no answer within ${TIMEOUT_MS} ms` });
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 200);
  });

  it("leaves the request only what the first lookup left of the timeout", async () => {
    // Mutation: the request's timer started afresh after a slow first lookup ends this at 1.6 timeouts.
    let lookups = 0;
    const slowThenHanging = async (): Promise<string[]> => {
      lookups++;
      if (lookups > 1) return never();
      await sleep(TIMEOUT_MS * 0.6);
      return [PUBLIC_ADDRESS];
    };
    const started = Date.now();
    const result = await sendVia("http://slow.example/hook", slowThenHanging);
    expect(result).toEqual({ ok: false, error: `timeout: no answer within ${TIMEOUT_MS} ms` });
    expect(lookups).toBe(2);
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 200);
  });
});

describe("a name's lookups are shared while one is out", () => {
  // The same fake resolver as above (named as one), counting its calls: what it stands for is the
  // system's, whose hanging lookups hold libuv's pool threads past every attempt's timeout.

  it("sends sixteen attempts at once to a name whose lookup hangs with one lookup, each ending at its timeout", async () => {
    // Mutation: a lookup per call makes 16 calls here, one for each attempt.
    const calls: string[] = [];
    const resolve = sharedLookups((hostname) => {
      calls.push(hostname);
      return new Promise<string[]>(() => {});
    });
    const started = Date.now();
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        sendWebhook({
          url: `http://${i % 2 ? "HANGS" : "hangs"}.example/hook/${i}`,
          headers: {},
          body: "{}",
          timeoutMs: TIMEOUT_MS,
          allowPrivate: false,
          resolve,
        }),
      ),
    );
    for (const result of results) {
      expect(result).toEqual({ ok: false, error: `timeout: no answer within ${TIMEOUT_MS} ms` });
    }
    expect(Date.now() - started).toBeLessThan(TIMEOUT_MS + 300);
    expect(calls).toEqual(["hangs.example"]);
    // Another name is looked up on its own, not held behind it.
    void resolve("other.example");
    expect(calls).toEqual(["hangs.example", "other.example"]);
  }, 5_000);

  it("keeps no answer: a lookup after the last one settled asks again", async () => {
    let answer = 0;
    const resolve = sharedLookups(async () => {
      answer++;
      await sleep(20);
      return [`93.184.216.${answer}`];
    });
    const [first, second] = await Promise.all([resolve("a.example"), resolve("a.example")]);
    expect(first).toEqual(["93.184.216.1"]);
    expect(second).toEqual(["93.184.216.1"]);
    expect(await resolve("a.example")).toEqual(["93.184.216.2"]);
  });

  it("shares the system resolver's lookups: a call while one is out gets the same lookup", async () => {
    // Mutation: systemResolve not wrapped in sharedLookups gives each call a lookup of its own.
    const first = systemResolve("localhost");
    expect(systemResolve("LOCALHOST")).toBe(first);
    expect((await first).length).toBeGreaterThan(0);
    expect(systemResolve("localhost")).not.toBe(first);
  });
});
