/**
 * The whole local stack on one machine with embedded defaults (docs/configuration.md, "The local stack"), in
 * order: embedded Postgres, migrations, the devnet, the enclave (initialised on first run, then given the
 * local signing policy with the policy key), the faucet treasury and x402 settler backed up and funded from
 * the operator pool, the
 * origin with its workers, the admin key only and its money switches on, an operator-provisioned
 * agent token, the restore drill of the first key batches, and last the edge worker in Miniflare.
 * `npm start` prints what it started; the soak (`npm run soak`) drives load through it.
 */
import { readFile } from "node:fs/promises";
import path from "node:path";
import { count, sql } from "drizzle-orm";
import type { Address } from "viem";
import { DEV_OPERATOR_POOL_ADDRESS } from "../devnet/constants.ts";
import { publicClientFor } from "../devnet/testing.ts";
import { socketAccepts } from "../enclave/socket-probe.ts";
import {
  httpOk,
  type ManagedChild,
  profiledProgram,
  startChild,
  waitUntilReady,
} from "../ops/lib/supervisor.ts";
import { connectDatabase, type Db, queryRows } from "../origin/db/client.ts";
import {
  type EmbeddedPostgresHandle,
  runningPostmaster,
  startEmbeddedPostgres,
} from "../origin/db/embedded.ts";
import { migrateDatabase } from "../origin/db/migrate.ts";
import { agentIdentities } from "../origin/db/schema.ts";
import { getRegistrationPolicy } from "../origin/registration/policy-repository.ts";
import { ensureWebhookSigningKeyFile } from "../origin/webhooks/signing.ts";
import { CHAIN_ID } from "../shared/constants.ts";
import { boundedLineWriter } from "../shared/node/unread-output.ts";
import { sleep } from "../shared/sleep.ts";
import { type EdgeHandle, startEdge } from "./edge.ts";
import {
  forgetLauncher,
  type LauncherRecord,
  recordLauncher,
  stopLeftovers,
  workerdChildren,
} from "./leftovers.ts";
import { type LocalAgent, loadOrCreateLocalAgent } from "./local-agent.ts";
import { enclaveInitialised, initEnclaveOnce, type LocalAuthority } from "./local-enclave.ts";
import {
  backupLocalSealedKeys,
  drillAndProveLocally,
  fundLocalSettler,
  fundLocalTreasury,
} from "./local-money.ts";
import { ensureLocalOperatorKey, type LocalOperatorKey } from "./local-operator.ts";
import { ensureLocalPolicy, LOCAL_FAUCET_TERMS, LOCAL_POLICY } from "./local-policy.ts";
import { type LocalSecrets, loadOrCreateLocalSecrets } from "./local-secrets.ts";
import { assertPortsFree } from "./ports.ts";

export type LocalStackParams = {
  dataDir: string;
  originPort: number;
  devnetPort: number;
  edgePort: number;
  /** Opens the edge worker's direct socket too (dev/edge.ts `directSocket`). */
  edgeDirectSocket?: boolean;
  pgPort: number;
  /** Postgres server settings added to the stack's own (a bench's pg_stat_statements). */
  pgSettings?: Readonly<Record<string, string>>;
  basePath: string;
  envId: string;
  /**
   * The stack's variables as the launcher was given them (set and not empty), in the order a
   * command names them: repeated in the command a refusal over a busy port suggests.
   */
  givenSettings?: Readonly<Record<string, string>>;
  /** Progress of the start-up and the stop, one line each. */
  say: (line: string) => void;
  /** Every output line of the devnet, enclave, origin and edge, prefixed with the part's name. */
  onPartLine?: (line: string) => void;
  /** Added to the origin's environment (after the local stack's own settings, so they win). */
  originEnv?: NodeJS.ProcessEnv;
  /**
   * Runs once the origin is up and its refill worker has made keys, before the restore drill: a
   * caller that provisions its own agents here has their batches drilled and identities proven by
   * the stack's one drill (each drill starts a throwaway enclave, most of a short run's time).
   */
  beforeDrill?: (db: Db) => Promise<void>;
  /**
   * Initialise a new enclave even though the database already has agent identities (their keys
   * are then lost for good). Off by default: a missing enclave beside a used database is a lost
   * enclave, which the recovery runbook restores (START_NEW_ENCLAVE=1 for `npm start`).
   */
  allowNewEnclave?: boolean;
  /** A part exited while the stack was running (not during stop), and is not restarted. */
  onPartExit?: (name: string, code: number | string) => void;
  /**
   * Restart an enclave that exits while the stack runs, on the same socket and data folder (the
   * origin reconnects by itself), rather than reporting it through onPartExit: `npm start` does;
   * the soak, which counts a dead part as a failure, does not. At most MAX_ENCLAVE_RESTARTS a minute.
   */
  restartEnclave?: boolean;
};

/** More exits than this within a minute and the enclave is left down (its data folder is broken, say). */
export const MAX_ENCLAVE_RESTARTS = 5;

/** What the stack started, once every part is ready. */
export type LocalStackReady = {
  devnetUrl: string;
  originUrl: string;
  /** The edge as clients reach it (the Node front that sets CF-Connecting-IP from the peer). */
  edgeUrl: string;
  edge: EdgeHandle;
  postgres: EmbeddedPostgresHandle;
  socketPath: string;
  authority: LocalAuthority;
  secrets: LocalSecrets;
  /** The faucet treasury's address, once the policy has one. */
  treasury: Address | undefined;
  /** The x402 settler's address (it pays the gas of settlements), once the policy has one. */
  settler: Address | undefined;
  /** What the demo is paid to: the enclave's payee key, sealed as the x402 payTo. */
  x402PayTo: Address | undefined;
  /** The operator-provisioned agent, or undefined when no verified key became free in time. */
  agent: LocalAgent | undefined;
  /** The devnet, enclave and origin processes, by name (the enclave's is the latest, once restarted). */
  children: Record<"devnet" | "enclave" | "origin", ManagedChild>;
  /** The registration policy as the database holds it at start: paused or open, with its day's quotas. */
  registration: { paused: boolean; perIpDaily: number; networkDaily: number };
  /** The local operator key (`.data/operator.key`), enrolled in the enclave: it approves held actions. */
  operator: LocalOperatorKey;
  /**
   * Stops the origin and starts it again with `env` added to its environment (each call replaces
   * the last call's additions), once it answers /healthz; `children.origin` follows. A bench uses
   * it to compare one origin setting against another within one run.
   */
  restartOrigin(env: NodeJS.ProcessEnv): Promise<void>;
};

export type LocalStack = {
  /** Starts every part in order; on failure stops what had started and rethrows. */
  start(): Promise<LocalStackReady>;
  /** Stops every part, last started first; safe to call at any time and more than once. */
  stop(): Promise<void>;
};

/** Pid of the cluster's postmaster, from the first line of its postmaster.pid (undefined if stopped). */
export async function postmasterPid(pgDir: string): Promise<number | undefined> {
  try {
    const pid = Number((await readFile(path.join(pgDir, "postmaster.pid"), "utf8")).split("\n")[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The launcher's refusal to put a new enclave beside a database whose wallets were made in a lost
 * one: a new enclave would make a new treasury, orphan the old float and answer every signing
 * request for those wallets "no such key".
 */
export function lostEnclaveMessage(dataDir: string, identities: number): string {
  return [
    `the database has ${identities} agent identities but ${path.join(dataDir, "enclave")} holds no enclave: their keys are in no enclave now.`,
    `Restore them from the backups in ${path.join(dataDir, "backups")} with the recovery runbook (docs/operations.md, "Disaster recovery").`,
    "To abandon those wallets and start a new enclave beside them instead: START_NEW_ENCLAVE=1 npm start;",
    `for a fresh local stack (every wallet and token gone): rm -rf ${dataDir}`,
  ].join(" ");
}

/**
 * The launcher's refusal to start beside its data folder's Postgres already running: another
 * launcher's on the same folder, an operator tool's run without the stack, or one a launcher
 * killed outright (kill -9, the OOM killer) could not stop, which then holds the folder and its
 * port; only that last is to be killed.
 */
export function leftoverPostgresMessage(pgDir: string, pid: number): string {
  return `the embedded Postgres of ${pgDir} is running (pid ${pid}): another npm start on this data folder or an operator tool is using it (let it finish, or stop it), or an earlier start killed outright left it (stop it with kill ${pid}); then npm start again`;
}

/** The launcher's refusal to start a second stack on a data folder a running one uses. */
export function runningStackMessage(dataDir: string, socketPath: string): string {
  return `a stack is already running on ${dataDir} (its Postgres and its enclave on ${socketPath} answer): use it, or stop it with Ctrl-C where it runs; a second stack needs its own data folder and ports (START_DATA_DIR, docs/operations.md#ports-and-their-variables)`;
}

/**
 * The devnet saves its chain when it stops; one that did not stop (a crash, a kill -9, a power
 * cut) comes back with the chain of its last stop, while Postgres kept every transaction mined
 * since. Balances would then be back where they were and each wallet's next transaction would wait
 * forever for the nonces the chain lost: the launcher refuses instead.
 */
async function assertChainHoldsDatabase(db: Db, devnetUrl: string, dataDir: string): Promise<void> {
  const [row] = await queryRows<{ mined: string | null }>(
    db,
    sql`select max(block_number)::text as mined from outgoing_transactions`,
  );
  if (row?.mined === null || row?.mined === undefined) return;
  const height = await publicClientFor(devnetUrl).getBlockNumber();
  if (BigInt(row.mined) <= height) return;
  throw new Error(
    `the devnet's chain ends at block ${height} but the database holds transactions mined up to block ${row.mined}: the devnet stopped without saving its chain (a crash, a kill -9, a power cut). Start afresh: rm -rf ${dataDir}`,
  );
}

/** The devnet answers eth_chainId with 77 (0x4d). */
async function answersChain77(url: string): Promise<boolean> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}',
    signal: AbortSignal.timeout(2_000),
  });
  if (!response.ok) return false;
  const body = (await response.json().catch(() => null)) as { result?: unknown } | null;
  return typeof body?.result === "string" && Number.parseInt(body.result, 16) === CHAIN_ID;
}

export function createLocalStack(params: LocalStackParams): LocalStack {
  const { dataDir, basePath, envId, say } = params;
  // Bounded for a reader that stalls (`npm start | less` left on its first screen): docs/operations.md#logs.
  const onPartLine =
    params.onPartLine ??
    boundedLineWriter(
      process.stdout,
      (count) => `[start] dropped ${count} lines of the parts' output: its reader did not keep up`,
    );
  const children: ManagedChild[] = [];
  let postgres: EmbeddedPostgresHandle | undefined;
  /** Postgres while it starts: a stop that arrives then waits for it, so as to stop it too. */
  let postgresStarting: Promise<EmbeddedPostgresHandle> | undefined;
  // The edge runs in this process (Miniflare owns its workerd), so it is stopped apart from the children.
  let edge: EdgeHandle | undefined;
  let stopping: Promise<void> | undefined;
  /** Work of the start-up that holds something of its own (the drill's throwaway enclave), closed first. */
  const closers: Array<() => Promise<void>> = [];
  /** What start() answered, once it has. */
  let running: LocalStackReady | undefined;

  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      say("stopping…");
      for (const close of closers) await close().catch(() => {});
      if (edge) {
        await edge.stop().catch(() => {});
        say("edge stopped");
      }
      for (const child of [...children].reverse()) {
        await child.stop();
        say(`${child.name} stopped`);
      }
      const pg = postgres ?? (await postgresStarting?.catch(() => undefined));
      if (pg) {
        await pg.stop().catch(() => {});
        await forgetLauncher(dataDir).catch(() => {});
        say("postgres stopped");
      }
    })();
    return stopping;
  };

  /** Children stopped on purpose while the stack runs (restartOrigin): their exit is no failure. */
  const replaced = new Set<ManagedChild>();
  const supervise = (child: ManagedChild): ManagedChild => {
    children.push(child);
    void child.exited.then((code) => {
      if (!stopping && !replaced.has(child)) params.onPartExit?.(child.name, code);
    });
    return child;
  };

  /**
   * The enclave, restarted when it exits while the stack runs (params.restartEnclave): the same
   * program on the same socket and data folder, so its keys, policy and counters are the ones it
   * had, and the origin's signer client connects to it again at its next request. `current` is
   * told each new process, so `children.enclave` and the stop order follow it.
   */
  const superviseEnclave = (
    start: () => ManagedChild,
    socketPath: string,
    current: (child: ManagedChild) => void,
  ): ManagedChild => {
    const exits: number[] = [];
    const watch = (child: ManagedChild): void => {
      void child.exited.then(async (code) => {
        if (stopping) return;
        const now = Date.now();
        exits.push(now);
        while (exits.length > 0 && now - exits[0]! > 60_000) exits.shift();
        if (!params.restartEnclave || exits.length > MAX_ENCLAVE_RESTARTS) {
          if (params.restartEnclave)
            say(`enclave    exited ${exits.length} times within a minute; not restarting it`);
          params.onPartExit?.(child.name, code);
          return;
        }
        say(`enclave    exited (${code}); restarting it on the same socket and data folder`);
        // A moment's pause, so an enclave that dies at once does not spin.
        await sleep(500);
        if (stopping) return;
        const next = start();
        children[children.indexOf(child)] = next;
        current(next);
        watch(next);
        try {
          await waitUntilReady(next, () => socketAccepts(socketPath));
          say(`enclave    ready again on ${socketPath}; the origin reconnects at its next request`);
        } catch {
          // It exited before it was ready: its own watch restarts it, within the bound.
        }
      });
    };
    const first = start();
    children.push(first);
    watch(first);
    return first;
  };

  /**
   * Throws once a stop has begun: the start-up then starts nothing more (a part started after the
   * stop went past it would outlive the stop, and an enclave init its record).
   */
  const going = (): void => {
    if (stopping) throw new Error("stopped while starting");
  };

  const start = async (): Promise<LocalStackReady> => {
    try {
      return await startParts();
    } catch (error) {
      await stop();
      throw error;
    }
  };

  const startParts = async (): Promise<LocalStackReady> => {
    say(`data folder ${dataDir}`);
    // Before the ports: the folder's own Postgres, still running, holds its port too, and is no
    // other program's.
    const pgDir = path.join(dataDir, "pg");
    await stopLeftovers(dataDir, say);
    const leftover = await runningPostmaster(pgDir);
    if (leftover) {
      // Its enclave answering too is a stack running on the folder (an enclave leaves with its
      // launcher, a Postgres does not): stopping that Postgres would only break it.
      const socketPath = path.join(dataDir, "enclave.sock");
      if (await socketAccepts(socketPath)) throw new Error(runningStackMessage(dataDir, socketPath));
      throw new Error(leftoverPostgresMessage(pgDir, leftover.pid));
    }
    await assertPortsFree(
      [
        { port: params.pgPort, variable: "EMBEDDED_PG_PORT", part: "embedded Postgres" },
        { port: params.devnetPort, variable: "DEVNET_PORT", part: "devnet" },
        { port: params.originPort, variable: "ORIGIN_PORT", part: "origin" },
        { port: params.edgePort, variable: "EDGE_PORT", part: "edge" },
      ],
      params.givenSettings,
    );
    postgresStarting = startEmbeddedPostgres({
      dir: pgDir,
      port: params.pgPort,
      // Sized for this stack, whose hot rows and indexes fit in a few MB: with the default 128 MB
      // the buffers kept filling with rows written once and never read again (the agent actions,
      // audit events), so Postgres's memory grew with its tables for as long as the soak ran,
      // toward 128 MB. Rows beyond 16 MB are read from the OS page cache.
      settings: { shared_buffers: "16MB", ...params.pgSettings },
    });
    const pg = await postgresStarting;
    postgres = pg;
    const launched: LauncherRecord = {
      launcher: process.pid,
      postgres: await postmasterPid(pgDir),
      workerd: [],
    };
    await recordLauncher(dataDir, launched);
    say(`postgres   ready on 127.0.0.1:${params.pgPort}`);

    const database = connectDatabase({ url: pg.url, driver: "pg", maxConnections: 2 });
    try {
      const { applied, restoredEvents } = await database.unbounded((db) => migrateDatabase(db));
      say(`migrations ${applied.length} applied`);
      if (restoredEvents > 0)
        say(
          `migrations the event log came from another cluster: ${restoredEvents} event(s) moved below its transaction ids`,
        );

      const enclaveDir = path.join(dataDir, "enclave");
      if (!enclaveInitialised(enclaveDir) && !params.allowNewEnclave) {
        const [row] = await database.db.select({ identities: count() }).from(agentIdentities);
        const identities = row?.identities ?? 0;
        if (identities > 0) throw new Error(lostEnclaveMessage(dataDir, identities));
      }

      const devnetUrl = `http://127.0.0.1:${params.devnetPort}`;
      going();
      const devnet = supervise(
        startChild({
          name: "devnet",
          entry: "devnet/main.ts",
          ...profiledProgram("devnet/main.ts"),
          args: ["--port", String(params.devnetPort), "--state", path.join(dataDir, "devnet-state.json")],
          onLine: onPartLine,
        }),
      );
      // Chain 77 from our own child: a node of another chain there is not the stack's devnet.
      await waitUntilReady(devnet, () => answersChain77(devnetUrl));
      say(`devnet     ready at ${devnetUrl}`);
      await assertChainHoldsDatabase(database.db, devnetUrl, dataDir);

      const socketPath = path.join(dataDir, "enclave.sock");
      going();
      const initialising = initEnclaveOnce({ dataDir, enclaveDir, envId, onLine: say });
      // A stop that arrives meanwhile waits for the init and its record: the enclave would otherwise
      // be initialised after the launcher had gone, with no record a recovery could start from.
      closers.push(() => initialising.then(() => undefined));
      const authority = await initialising;
      going();
      let enclave = superviseEnclave(
        () =>
          startChild({
            name: "enclave",
            entry: "enclave/main.ts",
            ...profiledProgram("enclave/main.ts"),
            args: ["serve", "--socket", socketPath, "--data-dir", enclaveDir],
            onLine: onPartLine,
          }),
        socketPath,
        (next) => {
          enclave = next;
          if (running) running.children.enclave = next;
        },
      );
      await waitUntilReady(enclave, () => socketAccepts(socketPath));
      say(`enclave    ready on ${socketPath}`);
      // The local stack plays the operator too: it seals a small policy with the policy key, which
      // the origin never gets (production keeps that key offline: docs/enclave.md).
      const sealed = await ensureLocalPolicy({
        socketPath,
        policyKeyFile: authority.policyKeyFile,
        onLine: say,
      });
      // And holds the operator key that loosens policies and approves held actions, made once.
      const operator = await ensureLocalOperatorKey({
        socketPath,
        policyKeyFile: authority.policyKeyFile,
        keyFile: path.join(dataDir, "operator.key"),
      });
      // The treasury and settler keys are backed up before any funds reach them, like
      // every key batch.
      await backupLocalSealedKeys({
        socketPath,
        adminKeyFile: authority.adminKeyFile,
        backupDir: path.join(dataDir, "backups"),
        onLine: say,
      });
      if (sealed.treasury) {
        const sent = await fundLocalTreasury(devnetUrl, sealed.treasury.faucetAddress);
        if (sent > 0n) say(`treasury   funded with ${sent} units from the operator pool`);
      }
      if (sealed.settler) {
        // The x402 settler pays the gas of settlements, funded like the treasury.
        const sent = await fundLocalSettler(devnetUrl, sealed.settler.settlerAddress);
        if (sent > 0n) say(`settler    gas funded with ${sent} units from the operator pool`);
      }

      const secrets = await loadOrCreateLocalSecrets(dataDir);
      // The origin's webhook signing key (v1a), made once like the operator key; never printed.
      const webhookKeyFile = path.join(dataDir, "webhook-signing.key");
      await ensureWebhookSigningKeyFile(webhookKeyFile);
      // Every switch on for the local stack; public registration is switched on with its
      // policy left paused, as the spec's initial policy is (docs/agents.md shows how to open it). The
      // local stack's clients are all on loopback, which production refuses: the local-development
      // switch lets each loopback address register as its own group.
      const originEnv: NodeJS.ProcessEnv = {
        ...process.env,
        ...params.originEnv,
        DATABASE_URL: pg.url,
        CHAIN_RPC_URL: devnetUrl,
        ORIGIN_PORT: String(params.originPort),
        BASE_PATH: basePath,
        AGENT_GATEWAY_ENABLED: "true",
        // Money with small local limits: the transfer limits and the faucet's terms are the sealed
        // ones (LOCAL_POLICY, LOCAL_FAUCET_TERMS), as the origin requires; the faucet pays 1 USDC a
        // minute, 10 USDC a day, per agent.
        AGENT_FAUCET_ENABLED: "true",
        AGENT_FAUCET_PAYOUT_AMOUNT: LOCAL_FAUCET_TERMS.payoutUnits.toString(),
        AGENT_FAUCET_COOLDOWN_MS: String(LOCAL_FAUCET_TERMS.cooldownMs),
        AGENT_FAUCET_DAILY_LIMIT: LOCAL_FAUCET_TERMS.dailyLimitUnits.toString(),
        AGENT_TRANSFER_ENABLED: "true",
        AGENT_TRANSFER_PER_TX_LIMIT: LOCAL_POLICY.perTxLimitUnits.toString(),
        AGENT_TRANSFER_DAILY_LIMIT: LOCAL_POLICY.dailyLimitUnits.toString(),
        // x402: the demo's terms are the sealed ones, as the origin requires.
        AGENT_X402_ENABLED: "true",
        AGENT_X402_AMOUNT: String(LOCAL_POLICY.x402AmountUnits),
        // The enclave's payee key (ensureLocalPolicy sealed it), so the demo's offers and receipts are signed.
        AGENT_X402_PAY_TO: String(sealed.policy?.x402PayTo),
        AGENT_X402_VALIDITY_MARGIN_SECONDS: String(LOCAL_POLICY.x402ValidityMarginSeconds),
        AGENT_X402_DAILY_LIMIT: String(LOCAL_POLICY.x402DailyLimit),
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
        AGENT_WEBHOOKS_SIGNING_KEY_FILE: webhookKeyFile,
        // Local receivers are on loopback, which production refuses (docs/operations.md#webhooks).
        AGENT_WEBHOOKS_ALLOW_PRIVATE: "true",
      };
      const originUrl = `http://127.0.0.1:${params.originPort}`;
      const startOrigin = async (env: NodeJS.ProcessEnv): Promise<ManagedChild> => {
        const child = supervise(
          startChild({
            name: "origin",
            entry: "origin/main.ts",
            ...profiledProgram("origin/main.ts"),
            env: { ...originEnv, ...env },
            onLine: onPartLine,
          }),
        );
        await waitUntilReady(child, () => httpOk(`${originUrl}${basePath}/healthz`));
        // The answer above was the origin's own only if it is still running now: one that lost the
        // port to another program exits at once.
        await sleep(250);
        if (child.process.exitCode !== null || child.process.signalCode !== null) {
          throw new Error(`origin exited right after /healthz answered on ${originUrl} (ORIGIN_PORT)`);
        }
        return child;
      };
      going();
      const origin = await startOrigin({});

      const agent = await loadOrCreateLocalAgent({ db: database.db, dataDir, devnetUrl });
      await params.beforeDrill?.(database.db);
      // The restore drill runs on the first batches, so the funding gate opens honestly.
      going();
      await drillAndProveLocally({
        db: database.db,
        socketPath,
        recoveryKeyFile: authority.recoveryKeyFile,
        recoveryEncKeyFile: authority.recoveryEncKeyFile,
        envId,
        onLine: say,
        onDriller: (close) => closers.push(close),
      });

      // Last, in front of the origin: the public ingress (docs/architecture.md).
      going();
      edge = await startEdge({
        port: params.edgePort,
        originUrl,
        edgeSharedSecret: secrets.edgeSharedSecret,
        basePath,
        callerHandlesSignals: true,
        directSocket: params.edgeDirectSocket,
        onLine: (line) => onPartLine(`[edge] ${line}`),
      });
      await recordLauncher(dataDir, { ...launched, workerd: await workerdChildren() });
      say(`edge       ready at ${edge.url}`);
      // As the database holds it: a stack started before may have been opened since (or paused).
      const policy = await getRegistrationPolicy(database.db);
      running = {
        devnetUrl,
        originUrl,
        edgeUrl: edge.url,
        edge,
        postgres: pg,
        socketPath,
        authority,
        secrets,
        treasury: sealed.treasury?.faucetAddress,
        settler: sealed.settler?.settlerAddress,
        x402PayTo: sealed.policy?.x402PayTo ?? undefined,
        agent,
        children: { devnet, enclave, origin },
        registration: {
          paused: policy.paused,
          perIpDaily: policy.perIpDaily,
          networkDaily: policy.networkDaily,
        },
        operator,
        restartOrigin: async (env) => {
          const ready = running!;
          const previous = ready.children.origin;
          replaced.add(previous);
          await previous.stop();
          children.splice(children.indexOf(previous), 1);
          ready.children.origin = await startOrigin(env);
        },
      };
      return running;
    } finally {
      await database.close();
    }
  };

  return { start, stop };
}
