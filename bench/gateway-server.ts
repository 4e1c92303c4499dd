/**
 * The origin as bench:gateway runs it: the real app (auth, limiter, routes) plus one bare Hono
 * route on the same server as the baseline. The per-agent limit and the /rpc in-flight caps are
 * raised so the benchmark measures the limiters' cost without being stopped by them. Env: DATABASE_URL, CHAIN_RPC_URL,
 * BENCH_PORT. Prints "ready" once listening.
 */
import { LockoutAllowance } from "../origin/auth/lockout-allowance.ts";
import { RecentAuthentications } from "../origin/auth/recent-authentications.ts";
import { fileBackupStore } from "../origin/backup-store.ts";
import { createChainClient } from "../origin/chain/client.ts";
import { createJsonRpcUpstream } from "../origin/chain/json-rpc-upstream.ts";
import { systemClock } from "../origin/clock.ts";
import { composeOrigin } from "../origin/compose.ts";
import { loadConfig } from "../origin/config.ts";
import { connectDatabase } from "../origin/db/client.ts";
import { InFlightLimiter } from "../origin/http/in-flight.ts";
import { SlidingWindowLimiter } from "../origin/http/rate-limiter.ts";
import type { Infrastructure } from "../origin/infrastructure.ts";
import { createLogger } from "../origin/logger.ts";
import { startHttpServer } from "../origin/server.ts";
import { createDormantSignerClient } from "../origin/signer/dormant-stub.ts";

const config = loadConfig({ ...process.env, AGENT_GATEWAY_ENABLED: "true", LOG_LEVEL: "silent" });
const rpcUrl = config.chain.rpcUrl!;
const infrastructure: Infrastructure = {
  config,
  database: connectDatabase({ url: config.database.url!, maxConnections: 10 }),
  chain: createChainClient({ rpcUrl, timeoutMs: config.chain.timeoutMs }),
  rpc: createJsonRpcUpstream({ url: rpcUrl, timeoutMs: config.chain.timeoutMs }),
  signer: createDormantSignerClient(),
  logger: createLogger("silent"),
  clock: systemClock,
  backupStore: fileBackupStore,
};
const limiters = {
  failuresPerIp: new SlidingWindowLimiter({ limit: 60, windowSeconds: 60 }),
  recentAuthentications: new RecentAuthentications(),
  lockoutAllowance: new LockoutAllowance(),
  requestsPerAgent: new SlidingWindowLimiter({ limit: 1_000_000_000, windowSeconds: 60 }),
  // Raised like the per-agent rate: the benchmark drives 64 connections with one token.
  rpcInFlight: new InFlightLimiter({ perKey: 1_000, total: 1_000 }),
};
const composed = await composeOrigin(infrastructure, { limiters });
if (!composed.ok) throw new Error(composed.error.errors.join("; "));
const app = composed.value.app;
app.get("/bench/bare", (c) => c.json({ ok: true }));
await startHttpServer(app, "127.0.0.1", Number(process.env.BENCH_PORT));
process.stdout.write("ready\n");
if (process.send) process.on("disconnect", () => process.exit(0));
