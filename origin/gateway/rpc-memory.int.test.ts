import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevnet } from "../../devnet/index.ts";
import { httpOk, type ManagedChild, startChild, waitUntilReady } from "../../ops/lib/supervisor.ts";
import { RPC_MAX_RESPONSE_BYTES } from "../../shared/constants.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { freePort } from "../../testing/free-port.ts";
import { send } from "../../testing/http.ts";
import { deployLogEmitter } from "../../testing/log-emitter.ts";
import { readTokens } from "../../testing/seed.ts";
import { RPC_IN_FLIGHT } from "./limits.ts";

// The origin as its own process (origin/main.ts), its memory read from /proc, while agents ask
// /rpc for the largest receipts the devnet holds: receipts of 2,000 logs of 256 bytes (about
// 1.9 MB of JSON each, 5.7 M gas), built by a contract on the devnet's real EVM.
//
// Stated bound: the origin's peak RSS (VmHWM) stays under its RSS before the load plus
// 16 calls in flight (the per-node cap) × 2 MiB (RPC_MAX_RESPONSE_BYTES) × 4 (the answer's
// chunks, its text, its parsed form and the re-serialized reply) + 64 MiB of runtime overhead,
// i.e. baseline + 192 MiB. Buffering whole answers, the second phase alone would hold
// 16 × 15 MB of answer text, about 1 GB once parsed and re-serialized.
const BOUND_BYTES = RPC_IN_FLIGHT.perNode * RPC_MAX_RESPONSE_BYTES * 4 + 64 * 1024 * 1024;

type Devnet = Awaited<ReturnType<typeof startDevnet>>;

async function memoryOf(pid: number): Promise<{ rss: number; peak: number }> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1]) * 1024;
  return { rss: kb("VmRSS"), peak: kb("VmHWM") };
}

describe("/rpc memory under the largest answers (origin as its own process)", () => {
  let testDb: TestDatabase;
  let devnet: Devnet;
  let origin: ManagedChild;
  let base: string;
  const tokens: string[] = [];
  const hashes: string[] = [];

  beforeAll(async () => {
    testDb = await createTestDatabase();
    devnet = await startDevnet({ port: 0 });
    tokens.push(...(await readTokens(testDb.handle.db, 4)));
    const emitter = await deployLogEmitter(devnet.url);
    for (let i = 0; i < 3; i++) hashes.push(await emitter.emit(2_000, 256));

    const port = await freePort();
    origin = startChild({
      name: "origin",
      entry: "origin/main.ts",
      env: {
        PATH: process.env.PATH,
        DATABASE_URL: testDb.url,
        CHAIN_RPC_URL: devnet.url,
        CHAIN_RPC_TIMEOUT_MS: "20000",
        AGENT_GATEWAY_ENABLED: "true",
        ORIGIN_PORT: String(port),
        LOG_LEVEL: "warn",
      },
      onLine: () => {},
    });
    base = `http://127.0.0.1:${port}/77`;
    await waitUntilReady(origin, () => httpOk(`${base}/healthz`));
  });
  afterAll(async () => {
    await origin?.stop();
    await devnet?.close();
    await testDb?.drop();
  });

  const batch = (token: string, size: number) =>
    send(`${base}/agent/v1/rpc`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: JSON.stringify(
        Array.from({ length: size }, (_, i) => ({
          jsonrpc: "2.0",
          id: i,
          method: "eth_getTransactionReceipt",
          params: [hashes[i % hashes.length]],
        })),
      ),
    });

  it("16 concurrent batches of the largest receipts keep the origin under the stated bound; oversized answers are refused, not buffered", async () => {
    const pid = origin.process.pid!;
    // Warm the paths (auth, the upstream socket pool) before measuring the baseline.
    expect((await batch(tokens[0]!, 1)).status).toBe(200);
    const before = await memoryOf(pid);

    // Answers that fit (one 1.9 MB receipt each), 16 at once; then answers of 8 such receipts
    // (about 15 MB), 16 at once.
    const fitting = await Promise.all(
      tokens.flatMap((token) => Array.from({ length: 4 }, () => batch(token, 1))),
    );
    const oversized = await Promise.all(
      tokens.flatMap((token) => Array.from({ length: 4 }, () => batch(token, 8))),
    );
    const after = await memoryOf(pid);
    const grew = after.peak - before.rss;
    process.stdout.write(
      `rpc memory: RSS before ${(before.rss / 2 ** 20).toFixed(0)} MiB, peak ${(after.peak / 2 ** 20).toFixed(0)} MiB, growth ${(grew / 2 ** 20).toFixed(0)} MiB, bound ${(BOUND_BYTES / 2 ** 20).toFixed(0)} MiB\n`,
    );
    expect(grew).toBeLessThan(BOUND_BYTES);

    // Those that fit are served whole…
    for (const response of fitting) {
      expect(response.status).toBe(200);
      const [reply] = response.body as { result?: { logs: unknown[] } }[];
      expect(reply?.result?.logs).toHaveLength(2_000);
    }
    // …the others were dropped at 2 MiB while they streamed, and refused.
    for (const response of oversized) {
      expect(response.status).toBe(200);
      const replies = response.body as { id: number; error?: { code: number; message: string } }[];
      expect(replies).toHaveLength(8);
      for (const reply of replies) {
        expect(reply.error).toEqual({
          code: -32000,
          message: `the answer exceeds ${RPC_MAX_RESPONSE_BYTES} bytes: ask for fewer items per call`,
        });
      }
    }
  });
});
