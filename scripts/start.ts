/**
 * `npm start`: the whole stack on one machine with embedded defaults (DESIGN §3), in order:
 * embedded Postgres, migrations, the devnet, the enclave (initialised on first run, then given the
 * local signing policy with the policy key), the faucet treasury funded from the operator pool, the
 * origin with its workers, the admin key only and its money switches on, an operator-provisioned
 * agent token, the restore drill of the first key batches, and last the edge worker in Miniflare.
 * Ctrl-C stops every part, last started first.
 *
 * Environment: START_DATA_DIR (default .data), ORIGIN_PORT (8788), DEVNET_PORT (8545),
 * EDGE_PORT (8787), EMBEDDED_PG_PORT (54320), BASE_PATH (/77), AGENT_ENV_ID (local-dev).
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { DEV_OPERATOR_POOL_ADDRESS } from "../devnet/constants.ts";
import { socketAccepts } from "../enclave/socket-probe.ts";
import { connectDatabase } from "../origin/db/client.ts";
import { startEmbeddedPostgres } from "../origin/db/embedded.ts";
import { migrateDatabase } from "../origin/db/migrate.ts";
import { type EdgeHandle, startEdge } from "./lib/edge.ts";
import { loadOrCreateLocalAgent } from "./lib/local-agent.ts";
import { initEnclaveOnce } from "./lib/local-enclave.ts";
import {
  backupLocalTreasury,
  drillAndProveLocally,
  fundLocalSettler,
  fundLocalTreasury,
} from "./lib/local-money.ts";
import { ensureLocalPolicy, LOCAL_POLICY } from "./lib/local-policy.ts";
import { loadOrCreateLocalSecrets } from "./lib/local-secrets.ts";
import { httpOk, type ManagedChild, startChild, waitUntilReady } from "./lib/supervisor.ts";

const dataDir = path.resolve(process.env.START_DATA_DIR ?? ".data");
const originPort = Number(process.env.ORIGIN_PORT ?? 8788);
const devnetPort = Number(process.env.DEVNET_PORT ?? 8545);
const edgePort = Number(process.env.EDGE_PORT ?? 8787);
const pgPort = Number(process.env.EMBEDDED_PG_PORT ?? 54320);
const basePath = process.env.BASE_PATH ?? "/77";
const envId = process.env.AGENT_ENV_ID ?? "local-dev";

const say = (line: string): void => {
  process.stdout.write(`[start] ${line}\n`);
};

async function main(): Promise<void> {
  const started = Date.now();
  const children: ManagedChild[] = [];
  // The edge runs in this process (Miniflare owns its workerd), so it is stopped apart from the children.
  let edge: EdgeHandle | undefined;
  let stopping = false;

  say(`data folder ${dataDir}`);
  const postgres = await startEmbeddedPostgres({ dir: path.join(dataDir, "pg"), port: pgPort });
  say(`postgres   ready on 127.0.0.1:${pgPort}`);

  const stopAll = async (code: number): Promise<never> => {
    if (!stopping) {
      stopping = true;
      say("stopping…");
      if (edge) {
        await edge.stop().catch(() => {});
        say("edge stopped");
      }
      for (const child of [...children].reverse()) {
        await child.stop();
        say(`${child.name} stopped`);
      }
      await postgres.stop().catch(() => {});
      say("postgres stopped");
    }
    process.exit(code);
  };
  process.on("SIGINT", () => void stopAll(0));
  process.on("SIGTERM", () => void stopAll(0));
  const supervise = (child: ManagedChild): ManagedChild => {
    children.push(child);
    void child.exited.then((code) => {
      if (stopping) return;
      say(`${child.name} exited unexpectedly (${code}); stopping the stack`);
      void stopAll(1);
    });
    return child;
  };

  try {
    const database = connectDatabase({ url: postgres.url, driver: "pg", maxConnections: 2 });
    const { applied } = await migrateDatabase(database.db);
    say(`migrations ${applied.length} applied`);

    const devnetUrl = `http://127.0.0.1:${devnetPort}`;
    const devnet = supervise(
      startChild({
        name: "devnet",
        entry: "devnet/main.ts",
        args: ["--port", String(devnetPort), "--state", path.join(dataDir, "devnet-state.json")],
      }),
    );
    await waitUntilReady(devnet, () =>
      httpOk(devnetUrl, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}',
      }),
    );
    say(`devnet     ready at ${devnetUrl}`);

    const enclaveDir = path.join(dataDir, "enclave");
    const socketPath = path.join(dataDir, "enclave.sock");
    const authority = await initEnclaveOnce({ dataDir, enclaveDir, envId, onLine: say });
    const enclave = supervise(
      startChild({
        name: "enclave",
        entry: "enclave/main.ts",
        args: ["serve", "--socket", socketPath, "--data-dir", enclaveDir],
      }),
    );
    await waitUntilReady(enclave, () => socketAccepts(socketPath));
    say(`enclave    ready on ${socketPath}`);
    // The local stack plays the operator too: it seals a small policy with the policy key, which
    // the origin never gets (issue 11; production keeps that key offline).
    const sealed = await ensureLocalPolicy({
      socketPath,
      policyKeyFile: authority.policyKeyFile,
      onLine: say,
    });
    if (sealed.treasury) {
      // Backed up before any funds reach it (issue 15), like every key batch.
      await backupLocalTreasury({
        socketPath,
        adminKeyFile: authority.adminKeyFile,
        backupDir: path.join(dataDir, "backups"),
        onLine: say,
      });
      const sent = await fundLocalTreasury(devnetUrl, sealed.treasury.faucetAddress);
      if (sent > 0n) say(`treasury   funded with ${sent} units from the operator pool`);
    }
    if (sealed.settler) {
      // The x402 settler pays the gas of settlements (DESIGN §3), funded like the treasury.
      const sent = await fundLocalSettler(devnetUrl, sealed.settler.settlerAddress);
      if (sent > 0n) say(`settler    gas funded with ${sent} units from the operator pool`);
    }

    const secrets = await loadOrCreateLocalSecrets(dataDir);
    // DESIGN §3: every switch on for the local stack; public registration is switched on with its
    // policy left paused, as the spec's initial policy is (the README shows how to open it). The
    // local stack's clients are all on loopback, which production refuses: the local-development
    // switch lets each loopback address register as its own group.
    const originEnv: NodeJS.ProcessEnv = {
      ...process.env,
      DATABASE_URL: postgres.url,
      CHAIN_RPC_URL: devnetUrl,
      ORIGIN_PORT: String(originPort),
      BASE_PATH: basePath,
      AGENT_GATEWAY_ENABLED: "true",
      // Money with small local limits: the transfer limits are the sealed ones (LOCAL_POLICY), as
      // the origin requires; the faucet pays 1 USDC a minute, 10 USDC a day, per agent.
      AGENT_FAUCET_ENABLED: "true",
      AGENT_FAUCET_PAYOUT_AMOUNT: "1000000",
      AGENT_FAUCET_COOLDOWN_MS: "60000",
      AGENT_FAUCET_DAILY_LIMIT: "10000000",
      AGENT_TRANSFER_ENABLED: "true",
      AGENT_TRANSFER_PER_TX_LIMIT: LOCAL_POLICY.perTxLimitUnits.toString(),
      AGENT_TRANSFER_DAILY_LIMIT: LOCAL_POLICY.dailyLimitUnits.toString(),
      // x402 (issue 13): the demo's terms are the sealed ones, as the origin requires.
      AGENT_X402_ENABLED: "true",
      AGENT_X402_AMOUNT: String(LOCAL_POLICY.x402AmountUnits),
      AGENT_X402_PAY_TO: String(LOCAL_POLICY.x402PayTo),
      // New identities are proven within seconds, so their funding gate opens soon after.
      IDENTITY_SWEEP_PERIOD_SECONDS: "15",
      AGENT_SIGNER_LIVE_IDENTITY_ENABLED: "true",
      AGENT_PUBLIC_REGISTRATION_ENABLED: "true",
      AGENT_REGISTRATION_ALLOW_LOOPBACK: "true",
      AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${socketPath}`,
      AGENT_ADMIN_AUTHORITY_KEY_FILE: authority.adminKeyFile,
      AGENT_ENV_ID: envId,
      AGENT_OPERATOR_POOL_ADDRESS: DEV_OPERATOR_POOL_ADDRESS,
      AGENT_REGISTRATION_IP_SECRET: secrets.registrationIpSecret,
      AGENT_REGISTRATION_ADMIN_SECRET: secrets.registrationAdminSecret,
      AGENT_EDGE_SHARED_SECRET: secrets.edgeSharedSecret,
      AGENT_ADMIN_API_TOKEN: secrets.adminApiToken,
      BACKUP_DIR: path.join(dataDir, "backups"),
    };
    const origin = supervise(startChild({ name: "origin", entry: "origin/main.ts", env: originEnv }));
    await waitUntilReady(origin, () => httpOk(`http://127.0.0.1:${originPort}${basePath}/healthz`));

    const agent = await loadOrCreateLocalAgent({ db: database.db, dataDir, devnetUrl });
    // DESIGN §3: the restore drill runs on the first batches, so the funding gate opens honestly.
    await drillAndProveLocally({
      db: database.db,
      socketPath,
      recoveryKeyFile: authority.recoveryKeyFile,
      recoveryEncKeyFile: authority.recoveryEncKeyFile,
      envId,
      onLine: say,
    });
    await database.close();

    // Last, in front of the origin: the public ingress (DESIGN §1, §3).
    edge = await startEdge({
      port: edgePort,
      originUrl: `http://127.0.0.1:${originPort}`,
      edgeSharedSecret: secrets.edgeSharedSecret,
      basePath,
      callerHandlesSignals: true,
    });
    say(`edge       ready at ${edge.url}`);

    say(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    say(`edge       ${edge.url}${basePath}`);
    say(`origin     http://127.0.0.1:${originPort}${basePath}`);
    say(`health     http://127.0.0.1:${originPort}${basePath}/healthz`);
    say(`gateway    http://127.0.0.1:${originPort}${basePath}/agent/v1/network`);
    say(`devnet     ${devnetUrl} (chain 77)`);
    say(`enclave    unix://${socketPath} (env ${envId})`);
    if (agent) {
      say(`agent      ${agent.agentId} wallet ${agent.wallet} (read, faucet, transfer)`);
      say(`token      ${agent.token}`);
      say(`try        curl -H "Authorization: Bearer $TOKEN" ${edge.url}${basePath}/agent/v1/balance`);
      say("           (the README shows a faucet payout, a transfer and reading the action)");
    } else {
      say("agent      none yet: the key pool has no verified key (see the origin's log)");
    }
    say(`register   switched on, policy paused: npm run registration -- open --reason "local testing"`);
    say(`console    http://127.0.0.1:${originPort}${basePath}/admin/agents (private origin only)`);
    say(
      `metrics    http://127.0.0.1:${originPort}${basePath}/metrics (Authorization: Bearer <adminApiToken>)`,
    );
    say(
      `secrets    ${path.join(dataDir, "local-secrets.json")}: the console's tokens are adminApiToken and registrationAdminSecret (never printed)`,
    );
    say(`policy key ${authority.policyKeyFile} (npm run enclave-policy; never given to the origin)`);
    if (existsSync(authority.recoveryKeyFile)) say(`recovery   ${authority.recoveryKeyFile} (keep offline)`);
    if (existsSync(authority.recoveryEncKeyFile)) {
      say(`recovery   ${authority.recoveryEncKeyFile} (encryption key of every backup; keep offline)`);
    }
    say("Ctrl-C stops everything");
  } catch (error) {
    say(`failed: ${error instanceof Error ? error.message : String(error)}`);
    await stopAll(1);
  }
}

void main();
