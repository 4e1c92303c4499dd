import { once } from "node:events";
import type { ServerResponse } from "node:http";
import { describe, expect, it, vi } from "vitest";
import { sleep } from "../shared/sleep.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { createGatewayClient } from "./index.ts";
import type { AgentEvent } from "./wire.ts";

// events() against a stream that is not the service's: one line that never ends, a `retry:` past the
// timer's range, no answer at all. The service does none of these, so the gateway is a loopback
// server (a fake of the fault only): its first stream sends an event, then the fault (or the first
// connection is never answered); the second, opened again, the next event.

const TOKEN = `agt_${"ab".repeat(8)}_${"cd".repeat(32)}`;
/** Far past any message of the service's, and past what the client may hold of one. */
const ENDLESS_LINE_BYTES = 48 * 1024 * 1024;

const eventOf = (id: string): string =>
  `id: ${id}\nevent: action.signed\ndata: ${JSON.stringify({
    id,
    type: "action.signed",
    occurred_at: "2026-01-01T00:00:00.000Z",
    data: { action_id: "a" },
  })}\n\n`;

/** Writes `bytes` of one unended `data:` line, as fast as the reader takes them. */
async function writeEndlessLine(response: ServerResponse, bytes: number): Promise<void> {
  const chunk = Buffer.alloc(64 * 1024, "x");
  response.write("data: ");
  for (let written = 0; written < bytes && !response.destroyed; written += chunk.byteLength) {
    if (!response.write(chunk)) await Promise.race([once(response, "drain"), once(response, "close")]);
  }
}

describe("events() from a stream that is not the service's", () => {
  // Mutation: without the parser's bound the client reads the line on and on (holding it all, and
  // scanning it again at each piece) and never opens the stream again while bytes keep coming.
  it("gives the connection up and opens it again after the last event, which it then yields", async () => {
    const lastEventIds: (string | undefined)[] = [];
    const gateway = await startLoopbackServer(async (request, response) => {
      lastEventIds.push(request.headers["last-event-id"] as string | undefined);
      response.writeHead(200, { "content-type": "text/event-stream" });
      if (lastEventIds.length === 1) {
        response.write(eventOf("5"));
        await writeEndlessLine(response, ENDLESS_LINE_BYTES);
      } else {
        response.write(eventOf("6"));
      }
      // Held open: the client ends each connection, not the server.
    });
    const stop = new AbortController();
    try {
      const wallet = createGatewayClient({ baseUrl: `${gateway.url}/77`, token: TOKEN });
      const seen: AgentEvent[] = [];
      const reading = (async () => {
        for await (const event of wallet.events({ signal: stop.signal })) {
          seen.push(event);
          if (seen.length === 2) break;
        }
      })();
      const deadline = Date.now() + 20_000;
      while (seen.length < 2 && Date.now() < deadline) await sleep(50);
      expect(
        lastEventIds,
        "the client held on to the endless line instead of opening the stream again",
      ).toEqual([undefined, "5"]);
      await reading;
      expect(seen.map((event) => event.id)).toEqual(["5", "6"]);
    } finally {
      stop.abort();
      await gateway.close();
    }
  }, 60_000);

  // Mutation: with the idle timeout armed only once the headers came, the client waits for them as
  // long as fetch does (undici: 300 s), silent, and never opens the stream again in the test's time.
  it("gives up a connection whose server sends no answer within the idle timeout and opens it again", async () => {
    let opened = 0;
    const gateway = await startLoopbackServer(async (_request, response) => {
      opened++;
      // The first connection is taken and never answered (a host or proxy that hangs).
      if (opened === 1) return;
      response.writeHead(200, { "content-type": "text/event-stream" });
      response.write(eventOf("7"));
    });
    const stop = new AbortController();
    try {
      const wallet = createGatewayClient({ baseUrl: `${gateway.url}/77`, token: TOKEN });
      const first = (async () => {
        for await (const event of wallet.events({ signal: stop.signal, idleTimeoutMs: 1_000 })) {
          return event.id;
        }
        return "the stream ended";
      })();
      const outcome = await Promise.race([first, sleep(20_000).then(() => "still waiting for headers")]);
      expect(outcome).toBe("7");
      expect(opened).toBe(2);
    } finally {
      stop.abort();
      await gateway.close();
    }
  }, 60_000);

  // Mutation: taking the `retry:` as it comes, past 2^31 ms Node's timer fires after 1 ms
  // (TimeoutOverflowWarning): the client opens the stream again at once, again and again. The pause
  // the client asks of setTimeout is read, and run at once, by a fake of the timer for pauses of
  // 10 s and more (the stream's idle timeout set under it): the 24–36 s it asks are not waited out.
  it("opens a stream closed with a retry: past the timer's range again after at most the 30 s ceiling, not at once", async () => {
    const opened: number[] = [];
    const resumedAfter: (string | undefined)[] = [];
    const gateway = await startLoopbackServer(async (request, response) => {
      opened.push(Date.now());
      resumedAfter.push(request.headers["last-event-id"] as string | undefined);
      response.writeHead(200, { "content-type": "text/event-stream" });
      if (opened.length === 1) {
        response.end(
          `${eventOf("5")}retry: 4000000000\nevent: stream.closed\ndata: {"reason":"shutting_down"}\n\n`,
        );
      } else {
        response.write(eventOf("6"));
      }
    });
    const stop = new AbortController();
    const realSetTimeout = globalThis.setTimeout;
    const pausesAsked: number[] = [];
    const timers = vi.spyOn(globalThis, "setTimeout").mockImplementation(((
      run: (...args: unknown[]) => void,
      ms?: number,
      ...args: unknown[]
    ) => {
      if ((ms ?? 0) < 10_000) return realSetTimeout(() => run(...args), ms);
      pausesAsked.push(ms!);
      return realSetTimeout(() => run(...args), 0);
    }) as typeof setTimeout);
    try {
      const wallet = createGatewayClient({ baseUrl: `${gateway.url}/77`, token: TOKEN });
      const seen: string[] = [];
      for await (const event of wallet.events({ signal: stop.signal, idleTimeoutMs: 9_000 })) {
        seen.push(event.id);
        if (seen.length === 2) break;
      }
      expect(seen).toEqual(["5", "6"]);
      expect(resumedAfter).toEqual([undefined, "5"]);
      expect(pausesAsked, "one pause, before the stream was opened again").toHaveLength(1);
      expect(pausesAsked[0], "the client asked the timer for more than it can hold").toBeLessThanOrEqual(
        1.2 * 30_000,
      );
      expect(pausesAsked[0], "the client opened the stream again at once").toBeGreaterThanOrEqual(
        0.8 * 30_000,
      );
    } finally {
      timers.mockRestore();
      stop.abort();
      await gateway.close();
    }
  }, 60_000);
});
