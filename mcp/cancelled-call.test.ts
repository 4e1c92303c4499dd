import { describe, expect, it } from "vitest";
import { sleep } from "../shared/sleep.ts";
import { actionView } from "../testing/action-view.ts";
import { startLoopbackServer } from "../testing/loopback-server.ts";
import { balanceCallAtSilentGateway, connectStdioHost } from "./testing/stdio-host.ts";

// `npm run mcp` as an MCP host runs it (the official client), whose host cancels a transfer
// (notifications/cancelled, what the client sends when the call's signal aborts: a person pressed
// stop) while the server waits out a 503's Retry-After before trying again. A gateway in an outage
// that answers 503 with a Retry-After, then takes the transfer, is not to be had on demand, so a
// loopback server stands in for it.

const RETRY_AFTER_SECONDS = 3;

const acceptedAction = actionView();

describe("npm run mcp, a call its host cancels", () => {
  // Mutation: a server that ignores the cancel retries once the pause is over, and the gateway takes
  // the transfer the person stopped, its answer sent to nobody.
  it("a transfer cancelled during a Retry-After pause is not sent again: the gateway sees one attempt", async () => {
    const attempts: string[] = [];
    let firstAttempt!: () => void;
    const reached = new Promise<void>((resolve) => {
      firstAttempt = resolve;
    });
    const gateway = await startLoopbackServer(async (request, response) => {
      let body = "";
      for await (const chunk of request) body += chunk;
      attempts.push((JSON.parse(body) as { idempotency_key: string }).idempotency_key);
      if (attempts.length === 1) {
        response.writeHead(503, {
          "content-type": "application/json",
          "retry-after": String(RETRY_AFTER_SECONDS),
        });
        response.end(
          JSON.stringify({ error: { code: "service_unavailable", message: "the service is unavailable" } }),
        );
        firstAttempt();
        return;
      }
      response.writeHead(201, { "content-type": "application/json" });
      response.end(JSON.stringify(acceptedAction));
    });
    const host = await connectStdioHost(`${gateway.url}/77`);
    try {
      const stop = new AbortController();
      const call = host.client.callTool(
        { name: "transfer", arguments: { to: `0x${"11".repeat(20)}`, amount: "1000" } },
        undefined,
        { signal: stop.signal },
      );
      await reached;
      stop.abort("stopped by the person");
      await expect(call).rejects.toThrow();
      // Past the pause the server would have waited, with room for the retry to arrive.
      await sleep(RETRY_AFTER_SECONDS * 1000 + 2_000);
      expect(attempts).toHaveLength(1);
      // The server still answers its host.
      expect((await host.client.listTools()).tools.length).toBeGreaterThan(0);
    } finally {
      await host.close();
      await gateway.close();
    }
  }, 60_000);

  // Mutation: a server that ignores the cancel holds the request to the end of the call's deadline
  // (10 s for this host), and a host that then goes away leaves it running until then.
  it("a read cancelled while the gateway has not answered ends at once: the host gone, the server exits 0 within a second or two", async () => {
    const { server, close } = await balanceCallAtSilentGateway();
    try {
      server.send({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: 2, reason: "stopped by the person" },
      });
      const cancelledAt = Date.now();
      server.child.stdin.end();
      const [code, signal] = await server.exited;
      expect({ code, signal }, server.stderr()).toEqual({ code: 0, signal: null });
      expect(Date.now() - cancelledAt).toBeLessThan(3_000);
    } finally {
      await close();
    }
  }, 60_000);
});
