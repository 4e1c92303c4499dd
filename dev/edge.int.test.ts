import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RPC_IN_FLIGHT } from "../origin/gateway/limits.ts";
import { BODY_DEADLINE_MS } from "../origin/http/read-body.ts";
import { sleep } from "../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../testing/database.ts";
import { type EdgeHandle, startTestEdge } from "../testing/edge.ts";
import { sendHalfBody } from "../testing/half-sent.ts";
import { sendUnchecked } from "../testing/http.ts";
import { startTestOrigin, type TestOrigin } from "../testing/origin.ts";
import { provisionedIdentity, seedFreeKeys } from "../testing/seed.ts";

// The local front (dev/edge.ts) with the edge worker in Miniflare, as `npm start` wires
// them, in front of the real origin app and Postgres. A client that goes away in the middle of its
// request must take the request with it all the way to the origin, as Cloudflare's front does;
// otherwise the origin goes on waiting for a body that will never come.

describe("the local front (dev/edge.ts) before Miniflare and the origin", () => {
  let testDb: TestDatabase;
  let origin: TestOrigin;
  let edge: EdgeHandle;
  const requestLines: string[] = [];
  const edgeLines: string[] = [];
  /** What the edge hands its output sink, which testing/edge.ts also gives the run's secret scan. */
  const sunkLines: string[] = [];
  let miniflareStopped = false;
  const tokens: string[] = [];

  beforeAll(async () => {
    testDb = await createTestDatabase();
    origin = await startTestOrigin({
      database: testDb.handle,
      onLogLine: (line) => {
        if (line.includes('"msg":"request"')) requestLines.push(line);
      },
    });
    edge = await startTestEdge({
      originUrl: origin.url,
      onLine: (line) => edgeLines.push(line),
      outputSink: (line) => sunkLines.push(line),
    });
    await seedFreeKeys(testDb.handle.db, 4);
    for (let i = 0; i < 4; i++) {
      const issued = await provisionedIdentity(testDb.handle.db, {
        capabilities: ["read"],
        origin: "operator",
      });
      tokens.push(issued.token);
    }
  });
  afterAll(async () => {
    // Miniflare refuses a second dispose ("Server is not running"): the last test stopped it.
    await edge?.stop().catch((error: unknown) => {
      if (!miniflareStopped) throw error;
    });
    await origin?.close();
    await testDb?.drop();
  });

  it("16 /rpc bodies cut by their clients half-way end at the origin at once, not at its body deadline", async () => {
    const slow = tokens.flatMap((token, index) =>
      Array.from({ length: RPC_IN_FLIGHT.perAgent }, (_, i) =>
        sendHalfBody(`${edge.url}/77/agent/v1/rpc`, {
          headers: { authorization: `Bearer ${token}` },
          ...((index + i) % 2 === 0 ? { declaredLength: 64 } : {}),
        }),
      ),
    );
    await Promise.all(slow.map((request) => request.sent));
    // Through the front and the worker to the origin's route, which waits for the rest.
    await sleep(1_000);
    expect(requestLines).toEqual([]);

    for (const request of slow) request.destroy();
    const cutAt = Date.now();
    while (requestLines.length < slow.length && Date.now() - cutAt < BODY_DEADLINE_MS + 2_000) {
      await sleep(25);
    }
    const endedAfter = Date.now() - cutAt;
    expect(requestLines).toHaveLength(slow.length);
    // Without the front passing the client's leaving on, the origin would wait for each body until
    // its deadline (BODY_DEADLINE_MS; Node's whole-request timeout before there was one: minutes).
    expect(endedAfter).toBeLessThan(BODY_DEADLINE_MS / 2);
    for (const line of requestLines) {
      const entry = JSON.parse(line) as { route: string; status: number; ms: number };
      expect(entry.route).toBe("/77/agent/v1/rpc");
      // 408 for a body cut short; workerd ends some cut bodies (chunked ones) as if complete, and
      // the origin then answers the `{` it got (a JSON-RPC parse error, 200). Neither waited.
      expect([200, 408]).toContain(entry.status);
      expect(entry.ms).toBeLessThan(BODY_DEADLINE_MS);
    }
  });

  // Last: it stops Miniflare behind the front.
  it("logs no URL when Miniflare does not answer: a token in the path or query stays out of the log", async () => {
    const token = tokens[0]!;
    await edge.miniflare.dispose();
    miniflareStopped = true;
    edgeLines.length = 0;
    sunkLines.length = 0;
    const response = await sendUnchecked(`${edge.url}/77/agent/v1/${token}?token=${token}`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(response.status).toBe(502);
    expect(edgeLines.join("\n")).toContain("Miniflare did not answer");
    expect(edgeLines.join("\n")).not.toContain(token.split("_")[1]!);
    expect(edgeLines.join("\n")).not.toContain(token.split("_")[2]!);
    // The front's own lines reach the output sink too, not only the worker's.
    expect(sunkLines).toEqual(edgeLines);
  });
});
