/**
 * The origin as bench:gateway runs it: the real app (auth, limiter, routes) plus one bare Hono
 * route on the same server as the baseline. The per-agent limit and the /rpc in-flight caps are
 * raised so the benchmark measures the limiters' cost without being stopped by them. Env: DATABASE_URL, CHAIN_RPC_URL,
 * BENCH_PORT. Prints "ready" once listening.
 */

import { RecentAuthentications } from "../origin/auth/recent-authentications.ts";
import { composeOrigin } from "../origin/compose.ts";
import { loadConfig } from "../origin/config.ts";
import { RPC_PREFETCH_IN_FLIGHT } from "../origin/gateway/limits.ts";
import { InFlightLimiter } from "../origin/http/in-flight.ts";
import { createLogger } from "../origin/logger.ts";
import { openInfrastructure } from "../origin/open-infrastructure.ts";
import { startHttpServer } from "../origin/server.ts";
import { LockoutAllowance } from "../shared/lockout-allowance.ts";
import { SlidingWindowLimiter } from "../shared/rate-limiter.ts";

// Built as main.ts builds it, metrics included. No enclave: the routes measured sign nothing, so
// an endpoint inherited from the shell is dropped. A pool of 10 connections, as the bench has
// always measured with.
const config = loadConfig({
  ...process.env,
  AGENT_SIGNER_SVC_HSM_ENDPOINT: undefined,
  AGENT_GATEWAY_ENABLED: "true",
  LOG_LEVEL: "silent",
  DATABASE_POOL_SIZE: "10",
});
const opened = await openInfrastructure(config, createLogger("silent"));
const limiters = {
  failuresPerIp: new SlidingWindowLimiter({ limit: 60, windowSeconds: 60 }),
  recentAuthentications: new RecentAuthentications(),
  lockoutAllowance: new LockoutAllowance(),
  requestsPerAgent: new SlidingWindowLimiter({ limit: 1_000_000_000, windowSeconds: 60 }),
  // Raised like the per-agent rate: the benchmark drives 64 connections with one token.
  rpcInFlight: new InFlightLimiter({ perKey: 1_000, total: 1_000 }),
  rpcPrefetch: new InFlightLimiter({
    perKey: RPC_PREFETCH_IN_FLIGHT.perToken,
    total: RPC_PREFETCH_IN_FLIGHT.perNode,
  }),
};
const composed = await composeOrigin(opened.infrastructure, { limiters, sealed: opened.sealed });
if (!composed.ok) throw new Error(composed.error.errors.join("; "));
const app = composed.value.app;
app.get("/bench/bare", (c) => c.json({ ok: true }));
await startHttpServer(app, "127.0.0.1", Number(process.env.BENCH_PORT));
process.stdout.write("ready\n");
if (process.send) process.on("disconnect", () => process.exit(0));
// Exits through process.exit, so a CPU profile (BENCH_CPU_PROF) is written.
process.on("SIGTERM", () => process.exit(0));
