import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { newAccount } from "../devnet/testing.ts";
import { sleep } from "../shared/sleep.ts";
import { type EdgeHandle, startTestEdge } from "../testing/edge.ts";
import { rejection } from "../testing/gateway-rejection.ts";
import { type MoneyStack, startMoneyStack } from "../testing/money-stack.ts";
import { startTestOrigin, type TestOrigin } from "../testing/origin.ts";
import { type RpcCutProxy, startRpcCutProxy } from "../testing/rpc-cut-proxy.ts";
import { startTcpProxy, type TcpProxy } from "../testing/tcp-proxy.ts";
import { afterFeedReads } from "../testing/worker-ticks.ts";
import {
  AgentAuthFailed,
  type AgentEvent,
  createGatewayClient,
  type GatewayClient,
  TooManyStreams,
  ValidationFailed,
} from "./index.ts";

// The client's events() and waitForAction() (docs/events.md#from-the-client) through the real
// worker in Miniflare, in front of an origin of a real stack (Postgres, enclave, devnet). That
// origin reads the chain through a pass-through that can withhold a receipt, so a transfer stays
// `submitted` until the test lets the tracker confirm it. The client reaches the edge through a
// TCP link the test can cut, which drops the stream's connection for real.

const EDGE_SECRET = randomBytes(32).toString("hex");
/** The poll period of the edge's origin's event feed (origin/events/feed.ts; a second by default). */
const FEED_POLL_MS = 200;

/** The events an iterator yields, collected in the background until it ends or throws. */
type Collected = {
  events: AgentEvent[];
  /** Settles when the loop ends: undefined, or what it threw. */
  ended: Promise<unknown>;
  waitForCount(count: number, timeoutMs?: number): Promise<AgentEvent[]>;
};

function collect(iterable: AsyncIterable<AgentEvent>, stopAfter?: number): Collected {
  const events: AgentEvent[] = [];
  const ended = (async () => {
    for await (const event of iterable) {
      events.push(event);
      if (events.length === stopAfter) break;
    }
  })().then(
    () => undefined,
    (error: unknown) => error,
  );
  return {
    events,
    ended,
    async waitForCount(count, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      while (events.length < count) {
        if (Date.now() > deadline) {
          throw new Error(`${events.length} events of ${count}: ${events.map((e) => e.type).join(", ")}`);
        }
        await sleep(20);
      }
      return events.slice(0, count);
    },
  };
}

describe("the client's events() and waitForAction() through the edge (real stack)", () => {
  let stack: MoneyStack;
  let rpc: RpcCutProxy;
  let origin: TestOrigin;
  let edge: EdgeHandle;
  let link: TcpProxy;
  /** Every request the clients sent, by path and query. */
  const requests: string[] = [];
  /**
   * How many of the clients' stream requests were answered. A stream is open once its answer
   * came: its start is fixed by then, so an event written after it reaches the stream.
   */
  let streamsAnswered = 0;
  const counting: typeof fetch = async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : input.toString());
    requests.push(`${url.pathname}${url.search}`);
    const response = await fetch(input, init);
    if (url.pathname.endsWith("/agent/v1/events")) streamsAnswered++;
    return response;
  };
  /** Resolves once `count` streams in all were answered. */
  const streamsOpen = async (count: number, timeoutMs = 20_000): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    while (streamsAnswered < count) {
      if (Date.now() > deadline)
        throw new Error(`${streamsAnswered} of ${count} streams open after ${timeoutMs} ms`);
      await sleep(20);
    }
  };
  const clientFor = (token: string): GatewayClient =>
    createGatewayClient({ baseUrl: `${link.url}/77`, token, fetch: counting });

  beforeAll(async () => {
    // A cluster of its own: the waits timed here end on events another file's transaction could
    // hold back on the suite's shared one (testing/events-horizon.ts).
    stack = await startMoneyStack({
      env: { AGENT_EDGE_SHARED_SECRET: EDGE_SECRET },
      database: "own cluster",
    });
    rpc = await startRpcCutProxy(stack.devnet.url);
    // Its feed polls every FEED_POLL_MS, not every second: the checks that nothing more came wait
    // for two of its whole reads (afterFeedReads), and the streams follow it.
    origin = await startTestOrigin({
      database: stack.db.handle,
      rpcUrl: rpc.url,
      env: stack.originEnv,
      events: { feedPollMs: FEED_POLL_MS },
    });
    edge = await startTestEdge({ originUrl: origin.url, edgeSharedSecret: EDGE_SECRET, onLine: () => {} });
    link = await startTcpProxy(edge.url);
  });
  afterAll(async () => {
    await link?.close();
    await edge?.stop();
    await origin?.close();
    await stack?.close();
    await rpc?.close();
  });

  /** Only `origin`'s tracker finishes transfers, and only once the test lets it. */
  const holdConfirmations = async (): Promise<void> => {
    await stack.origin.tracker!.stop();
    await origin.tracker!.stop();
    rpc.withhold("eth_getTransactionReceipt");
  };
  const releaseConfirmations = async (): Promise<void> => {
    rpc.withhold(undefined);
    expect((await origin.tracker!.tick()).confirmed).toBeGreaterThanOrEqual(1);
  };
  const restartTrackers = (): void => {
    rpc.withhold(undefined);
    stack.origin.tracker!.start();
    origin.tracker!.start();
  };

  it("yields a transfer's requested, signed, submitted and confirmed in order, the last as GET answers it", async () => {
    const agent = await stack.newAgent({ units: 10_000_000n });
    const wallet = clientFor(agent.token);
    const open = streamsAnswered + 1;
    const stream = collect(wallet.events(), 4);
    try {
      await holdConfirmations();
      await streamsOpen(open);
      const sent = await wallet.transfer({ to: newAccount().address, amount: 1_000n });
      await stream.waitForCount(3);
      await releaseConfirmations();
      await stream.waitForCount(4);
      // The loop broke after four: it ended without an error.
      expect(await stream.ended).toBeUndefined();
      expect(stream.events.map((event) => [event.type, event.data.action_id])).toEqual([
        ["action.requested", sent.action_id],
        ["action.signed", sent.action_id],
        ["action.submitted", sent.action_id],
        ["action.confirmed", sent.action_id],
      ]);
      expect(stream.events.at(-1)!.data).toEqual(await wallet.action(sent.action_id));
      for (const event of stream.events) {
        expect(event).toEqual({
          id: expect.stringMatching(/^\d+$/),
          type: expect.any(String),
          occurred_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
          data: expect.objectContaining({ action_id: sent.action_id }),
        });
      }
    } finally {
      restartTrackers();
    }
  });

  it("after a dropped connection it resumes with the last id: nothing lost, nothing repeated", async () => {
    const agent = await stack.newAgent({ units: 20_000_000n });
    const wallet = clientFor(agent.token);
    // The transfers go to the origin directly, so that they are written while the link is down.
    const direct = createGatewayClient({ baseUrl: stack.origin.base, token: agent.token });
    const opened = () => requests.filter((request) => request === "/77/agent/v1/events").length;
    const openedBefore = opened();
    const open = streamsAnswered + 1;
    const stream = collect(wallet.events());
    const transfers: string[] = [];
    const send = async (count: number): Promise<void> => {
      for (let i = 0; i < count; i++) {
        const sent = await direct.transfer({ to: newAccount().address, amount: 1_000n });
        transfers.push(sent.action_id);
        await direct.waitForAction(sent.action_id);
      }
    };
    try {
      await streamsOpen(open);
      await send(3);
      // Each transfer: requested, signed, confirmed (the devnet mines on arrival).
      await stream.waitForCount(9);
      link.cut("reset");
      await send(3);
      link.restore();
      await stream.waitForCount(18, 40_000);
      // A repeat would come with the origin's next reads of its feed.
      await afterFeedReads([origin]);
      // Mutation: reconnecting without Last-Event-ID (from now) loses the events written while the
      // link was down, and fails this; one that forgets what it yielded repeats none here either,
      // as the service resumes after the id it is sent.
      expect(opened() - openedBefore).toBeGreaterThanOrEqual(2);
      const ids = stream.events.map((event) => event.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids).toHaveLength(18);
      for (const id of transfers) {
        expect(
          stream.events.filter((event) => event.data.action_id === id).map((event) => event.type),
        ).toEqual(["action.requested", "action.signed", "action.confirmed"]);
      }
    } finally {
      link.restore();
    }
    // Aborting the signal ends the loop without an error.
    const controller = new AbortController();
    const more = collect(wallet.events({ after: stream.events[8]!.id, signal: controller.signal }));
    await more.waitForCount(9);
    controller.abort();
    expect(await more.ended).toBeUndefined();
    expect(more.events.map((event) => event.id)).toEqual(stream.events.slice(9).map((event) => event.id));
  });

  it("a stream opened from now that drops before its first event resumes where it started: what was written meanwhile arrives", async () => {
    const agent = await stack.newAgent({ units: 10_000_000n });
    const direct = createGatewayClient({ baseUrl: stack.origin.base, token: agent.token });
    // History: the agent's log holds events before the stream's start, none of which it replays.
    const before = await direct.transfer({ to: newAccount().address, amount: 1_000n });
    await direct.waitForAction(before.action_id);
    const open = streamsAnswered + 1;
    const stream = collect(clientFor(agent.token).events());
    try {
      await streamsOpen(open);
      // The stream's start is fixed once its answer came; the link drops before any event.
      link.cut("reset");
      // Written while the client has no stream: after its start, so it is the client's to see.
      const sent = await direct.transfer({ to: newAccount().address, amount: 1_000n });
      await direct.waitForAction(sent.action_id);
      link.restore();
      // Mutation: a stream that names no place before its first event leaves the client to
      // reconnect "from now", after the transfer, and this waits in vain.
      await stream.waitForCount(3, 40_000);
      await afterFeedReads([origin]);
      expect(stream.events.map((event) => [event.data.action_id, event.type])).toEqual([
        [sent.action_id, "action.requested"],
        [sent.action_id, "action.signed"],
        [sent.action_id, "action.confirmed"],
      ]);
    } finally {
      link.restore();
    }
  });

  it("a connection gone silent is given up after idleTimeoutMs and opened again where it was", async () => {
    const agent = await stack.newAgent({ units: 10_000_000n });
    const direct = createGatewayClient({ baseUrl: stack.origin.base, token: agent.token });
    const transfer = async (): Promise<string> => {
      const sent = await direct.transfer({ to: newAccount().address, amount: 1_000n });
      await direct.waitForAction(sent.action_id);
      return sent.action_id;
    };
    // No event and no ping (every 15 s) for 2 s counts as silence here.
    const open = streamsAnswered + 1;
    const stream = collect(clientFor(agent.token).events({ idleTimeoutMs: 2_000 }));
    await streamsOpen(open);
    const first = await transfer();
    await stream.waitForCount(3);
    link.stall();
    const second = await transfer();
    // Mutation: a client without the idle timeout waits on the silent connection for ever and
    // fails this.
    await stream.waitForCount(6, 20_000);
    await afterFeedReads([origin]);
    expect(stream.events.map((event) => [event.data.action_id, event.type])).toEqual([
      [first, "action.requested"],
      [first, "action.signed"],
      [first, "action.confirmed"],
      [second, "action.requested"],
      [second, "action.signed"],
      [second, "action.confirmed"],
    ]);
  });

  it("waitForAction answers once the action is confirmed, from a request the service held, not by polling", async () => {
    const agent = await stack.newAgent({ units: 10_000_000n });
    const wallet = clientFor(agent.token);
    try {
      await holdConfirmations();
      const sent = await wallet.transfer({ to: newAccount().address, amount: 1_000n });
      const path = `/77/agent/v1/actions/${sent.action_id}`;
      const before = requests.length;
      const waiting = wallet.waitForAction(sent.action_id).then((view) => ({ view, at: Date.now() }));
      await sleep(4_000);
      const confirmedAt = Date.now();
      await releaseConfirmations();
      const { view, at } = await waiting;
      expect(view.status).toBe("confirmed");
      // Mutation: waitForAction polling every 500 ms (as it did) makes some nine requests in the
      // four seconds and fails this. Held requests: the wait for `submitted` at most, then the one
      // the confirmation answered.
      const reads = requests.slice(before).filter((request) => request.startsWith(path));
      expect(reads.length, reads.join(", ")).toBeLessThanOrEqual(3);
      for (const read of reads) expect(read).toMatch(/\?wait=25$/);
      expect(at - confirmedAt).toBeLessThan(3_000);
    } finally {
      restartTrackers();
    }
  });

  it("a fifth stream of the token ends the first with TooManyStreams; a 4xx is its error class; breaking closes the connection", async () => {
    const agent = await stack.newAgent();
    const signals: AbortSignal[] = [];
    const watching: typeof fetch = (input, init) => {
      if (init?.signal) signals.push(init.signal);
      return counting(input, init);
    };
    const wallet = createGatewayClient({ baseUrl: `${link.url}/77`, token: agent.token, fetch: watching });
    const streams: Collected[] = [];
    const others = new AbortController();
    // One at a time, each open (counted by the token's cap) before the next: the first is the oldest.
    for (let i = 0; i < 5; i++) {
      const open = streamsAnswered + 1;
      streams.push(collect(wallet.events({ signal: i === 0 ? undefined : others.signal })));
      await streamsOpen(open);
    }
    // Mutation: reconnecting on too_many_streams (as on too_slow) leaves this loop running.
    const first = await Promise.race([streams[0]!.ended, sleep(10_000).then(() => "still running")]);
    expect(first).toBeInstanceOf(TooManyStreams);
    expect((first as TooManyStreams).exitCode).toBe(TooManyStreams.exitCode);
    others.abort();
    for (const stream of streams.slice(1)) expect(await stream.ended).toBeUndefined();

    // Leaving the loop aborts its request: the connection closes.
    const quick = collect(wallet.events({ after: "0" }), 1);
    const direct = createGatewayClient({ baseUrl: stack.origin.base, token: agent.token });
    await direct.faucet();
    await quick.waitForCount(1);
    expect(await quick.ended).toBeUndefined();
    expect(signals.at(-1)!.aborted).toBe(true);

    const refused = await rejection(
      collect(clientFor(`${agent.token.slice(0, -4)}0000`).events()).ended.then((error) => {
        throw error;
      }),
    );
    expect(refused).toBeInstanceOf(AgentAuthFailed);
    const unknown = await rejection(
      collect(wallet.events({ after: "9000000000000000000" })).ended.then((error) => {
        throw error;
      }),
    );
    expect(unknown).toBeInstanceOf(ValidationFailed);
    expect(unknown.status).toBe(400);
  });
});
