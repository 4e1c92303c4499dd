import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevnet } from "../../devnet/index.ts";
import { httpOk, type ManagedChild, startChild, waitUntilReady } from "../../ops/lib/supervisor.ts";
import { sleep } from "../../shared/sleep.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { freePort } from "../../testing/free-port.ts";
import { send } from "../../testing/http.ts";
import { deployLogEmitter } from "../../testing/log-emitter.ts";
import { rssBytes } from "../../testing/measure/proc-memory.ts";
import { readTokens } from "../../testing/seed.ts";
import { RPC_ANSWER_DEADLINE_MS, RPC_IN_FLIGHT } from "./limits.ts";

// Clients that send /rpc calls and never read what they are answered, against the origin as its
// own process (origin/main.ts) on the devnet's real EVM: raw sockets, each with a few calls
// pipelined for a receipt of 2,000 logs of 256 bytes (about 1.9 MB of JSON), none of its answers
// read. A call keeps its /rpc place until its answer has left, so what such clients hold is every
// place of the node, and the answers' bytes that neither the kernel nor the client took.

/** The calls each slow reader sends, one every 500 ms. */
const CALLS = 16;
/**
 * The origin's answer deadline here (AGENT_RPC_ANSWER_DEADLINE_MS), shorter than the default's
 * 30 s, which this test would wait out whole: it still leaves every place held with a margin
 * after the slow readers' places are taken and the three probes (about 7 s on a quiet machine),
 * as 20 s did after a fixed wait of 8 s before the probes.
 */
const ANSWER_DEADLINE_MS = 14_000;
/** How late the origin may close a slow reader after the deadline on a shared machine. */
const SLACK_MS = 5_000;

type Devnet = Awaited<ReturnType<typeof startDevnet>>;

/** The origin's resident bytes (it runs for the whole file). */
async function rssOf(pid: number): Promise<number> {
  return (await rssBytes(pid))!;
}

describe("/rpc clients that never read their answers (origin as its own process)", () => {
  let testDb: TestDatabase;
  let devnet: Devnet;
  let origin: ManagedChild;
  let port: number;
  let hash: string;
  const tokens: string[] = [];
  const sockets: Socket[] = [];

  beforeAll(async () => {
    testDb = await createTestDatabase();
    devnet = await startDevnet({ port: 0 });
    tokens.push(...(await readTokens(testDb.handle.db, 5)));
    hash = await (await deployLogEmitter(devnet.url)).emit(2_000, 256);
    port = await freePort();
    origin = startChild({
      name: "origin",
      entry: "origin/main.ts",
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: testDb.url,
        CHAIN_RPC_URL: devnet.url,
        AGENT_GATEWAY_ENABLED: "true",
        ORIGIN_PORT: String(port),
        AGENT_RPC_ANSWER_DEADLINE_MS: String(ANSWER_DEADLINE_MS),
        LOG_LEVEL: "warn",
      },
      onLine: () => {},
    });
    await waitUntilReady(origin, () => httpOk(`http://127.0.0.1:${port}/77/healthz`));
  });
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await origin?.stop();
    await devnet?.close();
    await testDb?.drop();
  });

  /**
   * A raw connection that sends `calls` receipt calls, one every 500 ms, and reads nothing back.
   * The kernel's buffers take the first two answers or so whole; the next stays in the origin's
   * memory, holding its /rpc place. Spaced, each takes a place of its own agent's only once the
   * one before has left, so none is refused for the agent's own slow calls.
   */
  const neverReads = (token: string, calls: number): Socket => {
    const socket = connect({ host: "127.0.0.1", port });
    // Paused from the start: Node reads no more than its buffer's worth, the kernel's then fills.
    socket.pause();
    sockets.push(socket);
    const body = JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "eth_getTransactionReceipt",
      params: [hash],
    });
    const request =
      `POST /77/agent/v1/rpc HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\nauthorization: Bearer ${token}\r\n` +
      `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    socket.on("error", () => {});
    void (async () => {
      for (let i = 0; i < calls && !socket.destroyed; i++) {
        socket.write(request);
        await sleep(500);
      }
    })();
    return socket;
  };
  const chainId = (token: string) =>
    send(`http://127.0.0.1:${port}/77/agent/v1/rpc`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }),
    });

  it("holds every /rpc place only until the answer deadline: then the origin closes them and other agents' calls are answered again", async () => {
    const pid = origin.process.pid!;
    // Warm the paths (auth, the upstream socket pool) before reading the baseline.
    expect((await chainId(tokens[4]!)).status).toBe(200);
    const before = await rssOf(pid);

    const startedAt = Date.now();
    const slow = tokens
      .slice(0, 4)
      .flatMap((token) => Array.from({ length: RPC_IN_FLIGHT.perAgent }, () => neverReads(token, CALLS)));
    expect(slow).toHaveLength(RPC_IN_FLIGHT.perNode);
    // Once their calls are answered, every place is theirs: another agent is refused while the
    // slow readers stay, probe after probe (three in a row, a second apart). Probed from the start:
    // until their calls have taken every place, a probe is answered and the count starts again.
    let refusedInRow = 0;
    const probesStart = Date.now();
    while (refusedInRow < 3 && Date.now() < probesStart + 20_000) {
      const probe = await chainId(tokens[4]!);
      if (probe.status === 429) {
        expect(probe.body).toMatchObject({ error: { code: "rate_limited" } });
        refusedInRow++;
      } else refusedInRow = 0;
      await sleep(1_000);
    }
    const heldAt = Date.now();
    const held = (await rssOf(pid)) - before;
    expect(refusedInRow, "another agent refused three times in a row").toBe(3);

    // The origin closes each slow reader's connection ANSWER_DEADLINE_MS after the answer
    // that holds its place was made (the client cannot tell: reading nothing, it sees no end of
    // it), and the place is the node's again.
    let freedAt: number | undefined;
    while (Date.now() < heldAt + ANSWER_DEADLINE_MS + SLACK_MS) {
      await sleep(500);
      if ((await chainId(tokens[4]!)).status === 200) {
        freedAt = Date.now();
        break;
      }
    }
    process.stdout.write(
      `rpc slow readers: the origin held ${(held / 2 ** 20).toFixed(1)} MiB more with every place taken; every place held ${heldAt - startedAt} ms after the start, and one free again ${freedAt === undefined ? "never" : `${freedAt - startedAt} ms`} after it\n`,
    );
    // Mutation: without the deadline nothing closes them, and the node's places stay theirs.
    expect(freedAt, "another agent's /rpc answered again once the deadline was over").toBeDefined();
    // Not before: every answer holding a place was made after the start.
    expect(freedAt! - startedAt).toBeGreaterThanOrEqual(ANSWER_DEADLINE_MS);
    // And by the deadline the origin was given, not its default's.
    expect(freedAt! - startedAt).toBeLessThan(RPC_ANSWER_DEADLINE_MS);
    const answered = await chainId(tokens[4]!);
    expect(answered.status).toBe(200);
    expect(answered.body).toEqual({ jsonrpc: "2.0", id: 1, result: "0x4d" });
    // A client that reads its answer takes the whole of the same 1.9 MB receipt: the deadline cuts
    // only answers left unread.
    const receipt = await send(`http://127.0.0.1:${port}/77/agent/v1/rpc`, {
      method: "POST",
      headers: { authorization: `Bearer ${tokens[4]!}` },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_getTransactionReceipt", params: [hash] }),
    });
    expect(receipt.status).toBe(200);
    expect((receipt.body as { result: { logs: unknown[] } }).result.logs).toHaveLength(2_000);
  });
});
