/**
 * Fault-injection child for the money crash tests: the origin as main.ts wires it (configuration
 * from the environment, the check against the sealed policy, the gateway), with one addition:
 * it SIGKILLs itself at MONEY_CRASH_AT during its first money operation — instants that cannot be
 * hit from outside: `after_signed` or `after_broadcast` of an agent action, or
 * `settle_after_broadcast` of an x402 settlement (after the chain accepted it, before its receipt). Its transaction tracker never runs,
 * so whatever it leaves in flight is for the next origin to finish. Prints its base URL.
 */
import { prepareMoney } from "../origin/actions/money-setup.ts";
import { createApp } from "../origin/app.ts";
import { createJsonRpcUpstream } from "../origin/chain/json-rpc-upstream.ts";
import { loadConfig } from "../origin/config.ts";
import { connectDatabase } from "../origin/db/client.ts";
import { systemClock } from "../origin/deps.ts";
import { createGatewayRouter } from "../origin/gateway/router.ts";
import { createLogger } from "../origin/logger.ts";
import { startHttpServer } from "../origin/server.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";

const config = loadConfig(process.env);
const crashAt = process.env.MONEY_CRASH_AT;
if (crashAt !== "after_signed" && crashAt !== "after_broadcast" && crashAt !== "settle_after_broadcast")
  throw new Error("MONEY_CRASH_AT is required");
const die = (): void => void process.kill(process.pid, "SIGKILL");
const logger = createLogger("silent");
const database = connectDatabase({ url: config.database.url!, maxConnections: 4 });
const rpc = createJsonRpcUpstream({ url: config.chain.rpcUrl!, timeoutMs: config.chain.timeoutMs });
const signer = createSignerClient({ endpoint: config.signer.endpoint, liveIdentityEnabled: true });
const prepared = await prepareMoney({
  config,
  signer,
  rpc,
  db: database.db,
  logger,
  faults:
    crashAt === "after_signed"
      ? { beforeBroadcast: die }
      : crashAt === "after_broadcast"
        ? { afterBroadcast: die }
        : undefined,
  x402Faults: crashAt === "settle_after_broadcast" ? { afterBroadcast: die } : undefined,
});
if (!prepared.ok || !prepared.money)
  throw new Error(`money refused: ${prepared.ok ? "off" : prepared.errors.join("; ")}`);
const money = prepared.money;
const app = createApp(
  { config, database, chain: undefined, rpc, signer, money, logger, clock: systemClock },
  { gateway: createGatewayRouter },
);
const server = await startHttpServer(app, "127.0.0.1", 0);
process.stdout.write(`${server.url}${config.http.basePath}\n`);
