import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount } from "../devnet/testing.ts";
import type { ActionView } from "../shared/gateway-schemas.ts";
import { sleep } from "../shared/sleep.ts";
import { type EdgeHandle, startTestEdge } from "../testing/edge.ts";
import { followEvents } from "../testing/event-stream.ts";
import { untilEventsServable } from "../testing/events-horizon.ts";
import { agentCalls, newKey } from "../testing/money-client.ts";
import { type MoneyStack, startMoneyStack } from "../testing/money-stack.ts";
import type { TestOrigin } from "../testing/origin.ts";
import { type RpcCutProxy, startRpcCutProxy } from "../testing/rpc-cut-proxy.ts";
import { startTcpProxy, type TcpProxy } from "../testing/tcp-proxy.ts";
import { afterFeedReads } from "../testing/worker-ticks.ts";

// An agent follows its events with a real EventSource client (the `eventsource` package) through
// the real worker in Miniflare, in front of an origin of a real stack (Postgres, enclave, devnet).
// That origin reads the chain through a pass-through that can withhold a receipt, so a transfer is
// seen `submitted` before it confirms; a second origin on the same database writes events too.

const EDGE_SECRET = randomBytes(32).toString("hex");
/** Well under the 15 s ping, after which a stream's first bytes would come anyway. */
const OPENS_WITHIN_MS = 5_000;

describe("the agent's event stream through the edge (real stack)", () => {
  let stack: MoneyStack;
  let rpc: RpcCutProxy;
  let origin: TestOrigin;
  let edge: EdgeHandle;
  /** Between the client and the edge: cutting it drops the stream's connection. */
  let link: TcpProxy;
  const eventsUrl = (through: TcpProxy = link) => `${through.url}/77/agent/v1/events`;
  /** A link of the test's own, to cut without dropping the streams of the tests beside it. */
  const ownLink = async (onTestFinished: (fn: () => Promise<void>) => void): Promise<TcpProxy> => {
    const own = await startTcpProxy(edge.url);
    onTestFinished(() => own.close());
    return own;
  };

  beforeAll(async () => {
    stack = await startMoneyStack({ env: { AGENT_EDGE_SHARED_SECRET: EDGE_SECRET } });
    rpc = await startRpcCutProxy(stack.devnet.url);
    origin = await stack.startOrigin({}, undefined, rpc.url);
    edge = await startTestEdge({ originUrl: origin.url, edgeSharedSecret: EDGE_SECRET, onLine: () => {} });
    link = await startTcpProxy(edge.url);
  });
  afterAll(async () => {
    await link?.close();
    await edge?.stop();
    await stack?.close();
    await rpc?.close();
  });

  it.sequential("a transfer's requested, signed, submitted and confirmed arrive in order, and only the agent's own", async () => {
    const [agent, other] = await stack.newAgents(2, { units: 10_000_000n });
    const stream = followEvents({ url: eventsUrl(), token: agent!.token });
    const otherStream = followEvents({ url: eventsUrl(), token: other!.token });
    try {
      // Only this origin's tracker may finish the transfer, once the test lets it.
      await stack.origin.tracker!.stop();
      await origin.tracker!.stop();
      // From now: each stream starts where the log is once it is open.
      await stream.waitForOpen();
      await otherStream.waitForOpen();
      rpc.withhold("eth_getTransactionReceipt");
      const calls = agentCalls(origin.base, agent!.token);
      const sent = await calls.transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "1000",
      });
      const actionId = (sent.body as ActionView).action_id;
      // The other agent's transfer, at the same time, through the other origin.
      const otherSent = await agentCalls(stack.origin.base, other!.token).transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "2000",
      });
      await stream.waitForCount(3);
      rpc.withhold(undefined);
      expect((await origin.tracker!.tick()).confirmed).toBeGreaterThanOrEqual(1);
      await stream.waitForCount(4);
      await sleep(1_200);
      expect(stream.events.map((event) => event.type)).toEqual([
        "action.requested",
        "action.signed",
        "action.submitted",
        "action.confirmed",
      ]);
      expect(new Set(stream.events.map((event) => event.body.data.action_id))).toEqual(new Set([actionId]));
      const ids = stream.events.map((event) => BigInt(event.id));
      expect([...ids].sort((a, b) => (a < b ? -1 : 1))).toEqual(ids);
      // The last event is the action as GET answers it now.
      expect(stream.events.at(-1)!.body.data).toEqual((await calls.action(actionId)).body);

      const otherId = (otherSent.body as ActionView).action_id;
      await otherStream.waitForCount(2);
      for (const event of otherStream.events) expect(event.body.data.action_id).toBe(otherId);
    } finally {
      stream.close();
      otherStream.close();
      stack.origin.tracker!.start();
      origin.tracker!.start();
    }
  });

  // The others run beside each other once it is done: each its own agent, reading only its own
  // events; the two that cut their client's connection cut a link of their own. The test above
  // stops both origins' trackers and withholds the chain's receipts, so it goes alone.
  describe("beside each other", { concurrent: true }, () => {
    it("a stream with no event yet tells its client it is open at once, before any event or ping", async ({
      expect,
    }) => {
      const agent = await stack.newAgent();
      // A real EventSource: its `open` comes when the response does.
      const openedAt = Date.now();
      const stream = followEvents({ url: eventsUrl(), token: agent.token });
      // A plain fetch: it resolves with the headers, and the first bytes are there to read.
      const connection = new AbortController();
      try {
        // Mutation: a stream whose first bytes wait for an event or the ping (every 15 s) fails
        // both: the edge hands the client its response only with the body's first chunk.
        await stream.waitForOpen(OPENS_WITHIN_MS);
        expect(Date.now() - openedAt).toBeLessThan(OPENS_WITHIN_MS);
        const fetchedAt = Date.now();
        const response = await Promise.race([
          fetch(eventsUrl(), {
            headers: { authorization: `Bearer ${agent.token}`, accept: "text/event-stream" },
            signal: connection.signal,
          }),
          sleep(OPENS_WITHIN_MS).then(() => undefined),
        ]);
        expect(response, `no response in ${OPENS_WITHIN_MS} ms`).toBeDefined();
        expect(Date.now() - fetchedAt).toBeLessThan(OPENS_WITHIN_MS);
        expect(response!.status).toBe(200);
        expect(response!.headers.get("content-type")).toMatch(/^text\/event-stream/);
        // What came is a comment line, which every Server-Sent Events client skips: no event.
        const first = await response!.body!.getReader().read();
        expect(new TextDecoder().decode(first.value)).toMatch(/^:[^\n]*\n\n/);
        expect(stream.events).toEqual([]);
      } finally {
        connection.abort();
        stream.close();
      }
    });

    it("after a dropped connection the client resumes with its last id: nothing lost, nothing repeated", async ({
      expect,
      onTestFinished,
    }) => {
      const agent = await stack.newAgent({ units: 20_000_000n });
      const mine = await ownLink(onTestFinished);
      const stream = followEvents({ url: eventsUrl(mine), token: agent.token });
      const calls = agentCalls(stack.origin.base, agent.token);
      try {
        await stream.waitForOpen();
        const before: string[] = [];
        for (let i = 0; i < 3; i++) {
          const sent = await calls.transfer({
            idempotency_key: newKey(),
            to: newAccount().address,
            amount: "1000",
          });
          before.push((sent.body as ActionView).action_id);
        }
        await stream.waitForCount(3);
        // The link drops; events keep being written while the client is away.
        mine.cut("reset");
        const during: string[] = [];
        for (let i = 0; i < 3; i++) {
          const sent = await calls.transfer({
            idempotency_key: newKey(),
            to: newAccount().address,
            amount: "1000",
          });
          during.push((sent.body as ActionView).action_id);
        }
        for (const id of [...before, ...during]) await calls.settled(id);
        mine.restore();
        // Each transfer: requested, signed, confirmed (the devnet mines on arrival).
        await stream.waitForCount(18, 30_000);
        await sleep(1_500);
        expect(stream.errors()).toBeGreaterThanOrEqual(1);
        const ids = stream.events.map((event) => event.id);
        expect(new Set(ids).size).toBe(ids.length);
        expect(ids.length).toBe(18);
        for (const id of [...before, ...during]) {
          expect(stream.ofAction(id).map((event) => event.type)).toEqual([
            "action.requested",
            "action.signed",
            "action.confirmed",
          ]);
        }
      } finally {
        mine.restore();
        stream.close();
      }
    });

    it("an EventSource opened from now whose connection drops before its first event resumes where it started", async ({
      expect,
      onTestFinished,
    }) => {
      const agent = await stack.newAgent({ units: 10_000_000n });
      const calls = agentCalls(stack.origin.base, agent.token);
      // History: the agent's log holds events before the stream's start, none of which it replays.
      const before = await calls.transfer({
        idempotency_key: newKey(),
        to: newAccount().address,
        amount: "1000",
      });
      await calls.settled((before.body as ActionView).action_id);
      // From now is from the log's horizon, the cluster's oldest running transaction, and another
      // file's on the suite's shared cluster can hold it back: the history's events would then come
      // as the exception docs/events.md names (a transaction that ended while an older one ran).
      await untilEventsServable(stack.db.handle.db);
      const mine = await ownLink(onTestFinished);
      const stream = followEvents({ url: eventsUrl(mine), token: agent.token });
      try {
        await stream.waitForOpen();
        // The link drops before any event; a transfer is written while the client is away.
        mine.cut("reset");
        const sent = await calls.transfer({
          idempotency_key: newKey(),
          to: newAccount().address,
          amount: "1000",
        });
        const actionId = (sent.body as ActionView).action_id;
        await calls.settled(actionId);
        mine.restore();
        // Mutation: with no id before the first event, the EventSource reconnects with no
        // Last-Event-ID, "from now", after the transfer, and this waits in vain.
        await stream.waitForCount(3, 30_000);
        await afterFeedReads([origin]);
        expect(stream.errors()).toBeGreaterThanOrEqual(1);
        expect(stream.events).toHaveLength(3);
        expect(stream.ofAction(actionId).map((event) => event.type)).toEqual([
          "action.requested",
          "action.signed",
          "action.confirmed",
        ]);
      } finally {
        mine.restore();
        stream.close();
      }
    });

    it("an event written through a second origin on the same database arrives on a stream held by the first", async ({
      expect,
    }) => {
      const agent = await stack.newAgent({ units: 5_000_000n });
      const stream = followEvents({ url: eventsUrl(), token: agent.token });
      try {
        await stream.waitForOpen();
        // stack.origin is another origin on the same database; the stream is held by `origin`.
        const sent = await agentCalls(stack.origin.base, agent.token).transfer({
          idempotency_key: newKey(),
          to: newAccount().address,
          amount: "1000",
        });
        const actionId = (sent.body as ActionView).action_id;
        await stream.waitForCount(3);
        expect(stream.events.map((event) => [event.type, event.body.data.action_id])).toEqual([
          ["action.requested", actionId],
          ["action.signed", actionId],
          ["action.confirmed", actionId],
        ]);
      } finally {
        stream.close();
      }
    });
  });
});
