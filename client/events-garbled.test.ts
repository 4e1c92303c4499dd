import { once } from "node:events";
import type { ServerResponse } from "node:http";
import { describe, expect, it } from "vitest";
import { sleep } from "../shared/sleep.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { createGatewayClient } from "./index.ts";
import type { AgentEvent } from "./wire.ts";

// events() against a stream that is not the service's: one line that never ends. The service never
// sends one, so the gateway is a loopback server (a fake of the fault only): its first stream sends
// an event, then the endless line; the second, opened again, the next event.

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

describe("events() from a stream that sends one line without end", () => {
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
});
