import { describe, expect, it } from "vitest";
import { HEADER_QUOTE_REUSE } from "../shared/constants.ts";
import { sleep } from "../shared/sleep.ts";
// The origin here is a stand-in whose answers are not the origin's: no OpenAPI check.
import { sendUnchecked as send } from "../testing/http.ts";
import { type OriginAnswer, useEdgeBeforeAnsweringOrigin } from "./testing/answering-origin.ts";

// The real worker in Miniflare, in front of the origin's place-holder: an unpaid GET's 402 that
// the origin says holds a while is given by the edge itself meanwhile, for that URL only
// (edge-worker/quotes.ts); a paid GET, and any other answer, reach the origin as before.

const REQUEST_ID = /^req_[0-9a-f]{16}$/;
const ORIGIN_REQUEST_ID = "req_00000000000000aa";
const QUOTE = JSON.stringify({ x402Version: 2, accepts: [{ scheme: "exact", amount: "10000" }] });

const QUOTED: OriginAnswer = {
  status: 402,
  headers: {
    "content-type": "application/json",
    "payment-required": Buffer.from(QUOTE).toString("base64"),
    "cache-control": "no-store",
    "x-request-id": ORIGIN_REQUEST_ID,
    [HEADER_QUOTE_REUSE]: "2",
  },
  body: QUOTE,
};

const stand = useEdgeBeforeAnsweringOrigin(QUOTED);

const demo = (query = "") => `${stand.edge.url}/77/x402/demo${query}`;

describe("the edge's quotes", () => {
  it("gives an unpaid GET the quote the origin said holds, itself, until it ends, for that URL only", async () => {
    const first = await send(demo("?q=1"));
    const started = Date.now();
    expect(first.status).toBe(402);
    expect(first.headers[HEADER_QUOTE_REUSE]).toBeUndefined();
    expect(first.headers["x-request-id"]).toBe(ORIGIN_REQUEST_ID);
    for (let i = 0; i < 3; i++) {
      const again = await send(demo("?q=1"));
      expect(again.status).toBe(402);
      expect(again.body).toEqual(JSON.parse(QUOTE));
      expect(again.headers["payment-required"]).toBe(QUOTED.headers["payment-required"]);
      expect(again.headers["content-type"]).toBe("application/json");
      expect(again.headers["cache-control"]).toBe("no-store");
      expect(again.headers[HEADER_QUOTE_REUSE]).toBeUndefined();
      // Its own request id, not the one the origin gave the first caller.
      expect(again.headers["x-request-id"]).toMatch(REQUEST_ID);
      expect(again.headers["x-request-id"]).not.toBe(ORIGIN_REQUEST_ID);
    }
    expect(stand.origin.received.map((seen) => seen.url)).toEqual(["/77/x402/demo?q=1"]);

    // Another URL, and a paid GET of the same one, reach the origin.
    expect((await send(demo("?q=2"))).status).toBe(402);
    stand.answer({ status: 200, headers: { "content-type": "application/json" }, body: "{}" });
    const paid = await send(demo("?q=1"), { headers: { "payment-signature": "e30=" } });
    expect(paid.status).toBe(200);
    expect(stand.origin.received.map((seen) => [seen.url, seen.headers["payment-signature"]])).toEqual([
      ["/77/x402/demo?q=1", undefined],
      ["/77/x402/demo?q=2", undefined],
      ["/77/x402/demo?q=1", "e30="],
    ]);

    // Once the origin's seconds are over the unpaid GET goes to the origin again.
    await sleep(2_000 - (Date.now() - started) + 50);
    expect((await send(demo("?q=1"))).status).toBe(200);
    expect(stand.origin.received).toHaveLength(4);
  });

  it("holds no answer but an unpaid GET's 402 with whole seconds, and never shows the header", async () => {
    const answers: OriginAnswer[] = [
      { ...QUOTED, status: 200 },
      { ...QUOTED, headers: { ...QUOTED.headers, [HEADER_QUOTE_REUSE]: "0" } },
      { ...QUOTED, headers: { ...QUOTED.headers, [HEADER_QUOTE_REUSE]: "1.5" } },
      { ...QUOTED, headers: { "content-type": "application/json" } },
    ];
    for (const [i, answer] of answers.entries()) {
      stand.answer(answer);
      for (let n = 0; n < 2; n++) {
        const answered = await send(demo(`?case=${i}`));
        expect(answered.status).toBe(answer.status);
        expect(answered.headers[HEADER_QUOTE_REUSE]).toBeUndefined();
      }
    }
    // A paid GET's 402 is no quote for anyone else, whatever the origin says.
    for (let n = 0; n < 2; n++) {
      const answered = await send(demo("?paid"), { headers: { "payment-signature": "e30=" } });
      expect(answered.status).toBe(402);
      expect(answered.headers[HEADER_QUOTE_REUSE]).toBeUndefined();
    }
    expect(stand.origin.received).toHaveLength(answers.length * 2 + 2);
  });
});
