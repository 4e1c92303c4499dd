/**
 * A whole money stack for integration tests, every part real: the devnet, the enclave process with
 * a sealed policy and treasury, a database, keys made by the refill worker and drilled, identities
 * proven by the sweep, wallets funded by transfers from the operator pool, and the origin app with
 * its money switches on (built as main.ts builds it, including the check against the sealed policy).
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import pino from "pino";
import type { Address } from "viem";
import { payFromOperatorPool } from "../dev/operator-pool.ts";
import { DEV_OPERATOR_POOL_ADDRESS, type Devnet, startDevnet } from "../devnet/index.ts";
import { startEnclaveServer } from "../enclave/server.ts";
import { createRestoreDriller, type RestoreDrillResult } from "../ops/lib/restore-driller.ts";
import type { SignerTimings } from "../origin/open-infrastructure.ts";
import type { TxTrackerOptions } from "../origin/outbox/index.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";
import type { CapabilityProvider, SignerClient, SignerPolicy } from "../origin/signer/types.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import { type AgentFactoryDeps, makeAgents, makeFreeKeys, type StackAgent } from "./agent-factory.ts";
import type { TestDatabase } from "./database.ts";
import { createEnclaveFixture, type EnclaveProcess, startEnclaveProcess } from "./enclave-process.ts";
import { startTestOrigin, type TestOrigin } from "./origin.ts";
import { startOwnPostgres } from "./own-postgres.ts";

export type MoneyStack = {
  db: TestDatabase;
  devnet: Devnet;
  enclave: EnclaveProcess;
  signer: SignerClient;
  origin: TestOrigin;
  /** The environment the origin was started with (for a second origin on the same stack). */
  originEnv: Record<string, string>;
  /** The whole environment of an origin process (origin/main.ts) on this stack. */
  processEnv(overrides?: Record<string, string>): Record<string, string>;
  treasury: Address;
  /** The x402 settler's address, when the stack was started with x402 on. */
  settler: Address | undefined;
  /** The enclave's x402 payee key's address (made at init): it signs the demo's offers and receipts. */
  payee: Address;
  policy: SignerPolicy;
  /** Where the refill wrote each batch's backup envelope (BACKUP_DIR). */
  backupDir: string;
  /** Mints capabilities of the enclave's three authorities. */
  authorities: { admin: CapabilityProvider; policy: CapabilityProvider; recovery: CapabilityProvider };
  /**
   * Drills a batch (docs/operations.md, "Restore drills"): restored from the recovery key into the stack's
   * one throwaway enclave (shared by every drill of this stack, stopped and deleted at close).
   */
  drill(batchId: string): Promise<RestoreDrillResult>;
  /**
   * A new agent on a fresh key. `units` funds its wallet from the operator pool; `drilled: false`
   * leaves its key batch without restore evidence; `verified: false` skips the identity proof.
   */
  newAgent(options?: {
    capabilities?: string[];
    units?: bigint;
    drilled?: boolean;
    verified?: boolean;
  }): Promise<StackAgent>;
  /** `count` agents on one batch (one drill for all), each funded with `units` when set. */
  newAgents(count: number, options?: { capabilities?: string[]; units?: bigint }): Promise<StackAgent[]>;
  /** `count` free keys on a fresh batch (not drilled: registrations need none), to issue. */
  addFreeKeys(count: number): Promise<void>;
  /**
   * Starts another origin on the same database, enclave and devnet (env overrides applied),
   * reaching the devnet at `rpcUrl` when given (a pass-through in front of it).
   */
  startOrigin(env?: Record<string, string>, tracker?: TxTrackerOptions, rpcUrl?: string): Promise<TestOrigin>;
  close(): Promise<void>;
};

export type MoneyStackOptions = {
  policy?: Partial<SignerPolicy>;
  /** The treasury's sealed budget, in units. */
  treasuryBudgetUnits?: bigint;
  /** What the treasury is funded with, in units. */
  treasuryUnits?: bigint;
  /**
   * Origin environment overrides (limits, switches). AGENT_FAUCET_PAYOUT_AMOUNT, _COOLDOWN_MS and
   * _DAILY_LIMIT are sealed with the treasury too, as the origin requires.
   */
  env?: Record<string, string>;
  /**
   * Turns x402 on (docs/x402.md): the sealed x402 terms, a settler key made by configure_settler and
   * funded from the operator pool, and the origin's x402 switch.
   */
  x402?: { amountUnits: bigint; payTo: Address | "enclave-payee" };
  /**
   * The database to use instead of a clone of the suite's template (a test-owned cluster), or
   * "own cluster" for one started here: for a file whose timings read the event log's horizon, which
   * the shared cluster's other files hold back (testing/events-horizon.ts).
   */
  database?: TestDatabase | "own cluster";
  /**
   * False: no in-process origin (`origin` then throws). For tests whose origins are processes
   * under a fault, where a second tracker on a healthy path would finish their work for them.
   */
  inProcessOrigin?: boolean;
  /** Timings of the stack's own origin's transaction tracker (a fault test may slow it right down). */
  tracker?: TxTrackerOptions;
  /**
   * The signer client's timings in every origin `startOrigin` starts (the client's own unless
   * given): a test that stops the stack's enclave may have them reconnect sooner once it is back.
   */
  signerTimings?: SignerTimings;
  /**
   * What an x402 presentation held by another waits beyond the receipt wait in every origin
   * `startOrigin` starts (5 s unless given): a test that waits that hold out with mining held may
   * shorten it.
   */
  x402HoldBeyondReceiptMs?: number;
  /** The most calls the devnet takes in one JSON-RPC batch (a hosted node's cap); geth's 1000 unless given. */
  devnetMaxBatchLength?: number;
  /**
   * The enclave's clock, for a test that must put it at a UTC day's end: the enclave's own server
   * (what its process runs) is then served in this process on the same socket and data folder, as
   * enclave/testing/clocked-enclave.ts does, since the process reads the system clock, which no test
   * can move. Its process controls (`enclave.start`, `stop`, `kill`) are not for such a stack.
   */
  enclaveNow?: () => Date;
};

export async function startMoneyStack(options: MoneyStackOptions = {}): Promise<MoneyStack> {
  // Loaded only when needed: it reads the suite's cluster from vitest, which a benchmark bringing
  // its own database (bench/events.ts) runs without.
  const db =
    options.database === "own cluster"
      ? (await startOwnPostgres()).database
      : (options.database ?? (await (await import("./database.ts")).createTestDatabase()));
  const devnet = await startDevnet({ port: 0, maxBatchLength: options.devnetMaxBatchLength });
  const enclave = options.enclaveNow
    ? await serveEnclaveHere(options.enclaveNow)
    : await startEnclaveProcess({ envId: "money-test" });
  const backupDir = await mkdtemp(path.join(tmpdir(), "money-backups-"));
  // The origin's admin key, as a node keeps it (a 32-byte hex seed, mode 0600): the origin seals
  // the tightenings of agents' policies with it (origin/policy/change.ts). Only the tracker's
  // workers run in a test origin, so no key-pool refill starts from it.
  const secretsDir = await mkdtemp(path.join(tmpdir(), "money-secrets-"));
  const adminKeyFile = path.join(secretsDir, "admin-authority.key");
  await writeFile(adminKeyFile, Buffer.from(enclave.adminSecret).toString("hex"), { mode: 0o600 });
  const signer = createSignerClient({ endpoint: `unix://${enclave.socketPath}`, liveIdentityEnabled: true });
  const minter = (authority: Uint8Array): CapabilityProvider =>
    createCapabilityMinter({ authority, envId: enclave.envId, client: signer });
  const authorities = {
    admin: minter(enclave.adminSecret),
    policy: minter(enclave.policySecret),
    recovery: minter(enclave.recoverySecret),
  };

  const unsealed = await signer.getPolicy();
  if (!unsealed.ok || !unsealed.value.payee) throw new Error("get_policy: the enclave names no payee key");
  const payee = unsealed.value.payee.payeeAddress;
  // "enclave-payee": the demo is paid to the enclave's payee key, so its offers and receipts are signed.
  const x402 = options.x402
    ? {
        amountUnits: options.x402.amountUnits,
        payTo: options.x402.payTo === "enclave-payee" ? (payee.toLowerCase() as Address) : options.x402.payTo,
      }
    : undefined;
  const policy: SignerPolicy = {
    perTxLimitUnits: 10_000_000n,
    dailyLimitUnits: 50_000_000n,
    recipientAllowlist: null,
    x402AmountUnits: null,
    x402PayTo: null,
    x402MaxTimeoutSeconds: 180,
    operatorPool: DEV_OPERATOR_POOL_ADDRESS,
    feeCeilingWei: 10n ** 15n,
    // The origin's defaults; the origin is given the same below.
    x402ValidityMarginSeconds: 6,
    x402DailyLimit: 1_000,
    // 1,000 USDC of settler fees a day: the settler's whole float, so no test meets it by accident.
    settlerDailyFeeUnits: 1_000_000_000n,
    ...(x402 ? { x402AmountUnits: x402.amountUnits, x402PayTo: x402.payTo } : {}),
    ...options.policy,
  };
  const sealed = await signer.configurePolicy(policy, authorities.policy);
  if (!sealed.ok) throw new Error(`configure_policy: ${sealed.error.code}`);
  // The faucet's terms are sealed with the treasury and must be the origin's (money-setup.ts).
  const faucetEnv: Record<string, string> = {
    AGENT_FAUCET_PAYOUT_AMOUNT: "1000000",
    AGENT_FAUCET_COOLDOWN_MS: "60000",
    AGENT_FAUCET_DAILY_LIMIT: "5000000",
  };
  for (const name of Object.keys(faucetEnv)) faucetEnv[name] = options.env?.[name] ?? faucetEnv[name]!;
  const treasury = await signer.configureTreasury(
    {
      budgetUnits: options.treasuryBudgetUnits ?? 1_000_000_000n,
      payoutUnits: BigInt(faucetEnv.AGENT_FAUCET_PAYOUT_AMOUNT!),
      cooldownMs: Number(faucetEnv.AGENT_FAUCET_COOLDOWN_MS),
      dailyLimitUnits: BigInt(faucetEnv.AGENT_FAUCET_DAILY_LIMIT!),
    },
    authorities.policy,
  );
  if (!treasury.ok) throw new Error(`configure_treasury: ${treasury.error.code}`);
  await payFromOperatorPool(
    devnet.url,
    treasury.value.faucetAddress,
    (options.treasuryUnits ?? 1_000_000_000n) * WEI_PER_UNIT,
  );

  let settler: Address | undefined;
  if (options.x402) {
    const made = await signer.configureSettler({}, authorities.policy);
    if (!made.ok) throw new Error(`configure_settler: ${made.error.code}`);
    settler = made.value.settlerAddress;
    await payFromOperatorPool(devnet.url, settler, 1_000n * 1_000_000n * WEI_PER_UNIT);
  }

  const originEnv: Record<string, string> = {
    AGENT_FAUCET_ENABLED: "true",
    AGENT_TRANSFER_ENABLED: "true",
    ...faucetEnv,
    AGENT_TRANSFER_PER_TX_LIMIT: policy.perTxLimitUnits.toString(),
    AGENT_TRANSFER_DAILY_LIMIT: policy.dailyLimitUnits.toString(),
    ...(policy.recipientAllowlist
      ? { AGENT_TRANSFER_RECIPIENT_ALLOWLIST: policy.recipientAllowlist.join(",") }
      : {}),
    AGENT_OPERATOR_POOL_ADDRESS: policy.operatorPool,
    AGENT_SIGNER_SVC_HSM_ENDPOINT: `unix://${enclave.socketPath}`,
    AGENT_SIGNER_LIVE_IDENTITY_ENABLED: "true",
    AGENT_ADMIN_AUTHORITY_KEY_FILE: adminKeyFile,
    AGENT_ENV_ID: enclave.envId,
    // The key pool's refill writes here, not in the checkout's `.data` (testing/global-setup.ts).
    BACKUP_DIR: backupDir,
    ...(x402
      ? {
          AGENT_X402_ENABLED: "true",
          AGENT_X402_AMOUNT: x402.amountUnits.toString(),
          AGENT_X402_PAY_TO: x402.payTo,
          AGENT_X402_VALIDITY_MARGIN_SECONDS: String(policy.x402ValidityMarginSeconds),
          AGENT_X402_DAILY_LIMIT: String(policy.x402DailyLimit),
        }
      : {}),
    ...options.env,
  };
  const origins: TestOrigin[] = [];
  const startOrigin = async (
    env: Record<string, string> = {},
    tracker?: TxTrackerOptions,
    rpcUrl: string = devnet.url,
  ): Promise<TestOrigin> => {
    const started = await startTestOrigin({
      database: db.handle,
      rpcUrl,
      env: { ...originEnv, ...env },
      tracker,
      signerTimings: options.signerTimings,
      x402HoldBeyondReceiptMs: options.x402HoldBeyondReceiptMs,
    });
    origins.push(started);
    return started;
  };
  const origin = options.inProcessOrigin === false ? undefined : await startOrigin({}, options.tracker);

  const identity = await signer.getSealedIdentity();
  if (!identity.ok) throw new Error(`get_sealed_identity: ${identity.error.code}`);
  const driller = createRestoreDriller({
    identity: identity.value,
    recoveryAuthority: enclave.recoverySecret,
    recoveryEncryptionKey: enclave.recoveryEncKey,
  });
  const agentDeps: AgentFactoryDeps = {
    db: db.handle.db,
    signer,
    authorities: { admin: authorities.admin },
    driller,
    devnetUrl: devnet.url,
    envId: enclave.envId,
    backupDir,
  };
  // One at a time, whoever asks: an agent must get a key of its own call's batch (makeAgents), and
  // tests that run at once (it.concurrent) each make their own.
  let agentsMade: Promise<unknown> = Promise.resolve();
  const newAgent: MoneyStack["newAgent"] = (agentOptions = {}) => {
    const made = agentsMade.then(async () => (await makeAgents(agentDeps, 1, agentOptions))[0]!);
    agentsMade = made.catch(() => {});
    return made;
  };
  return {
    db,
    devnet,
    enclave,
    signer,
    get origin(): TestOrigin {
      if (!origin) throw new Error("this stack was started without an in-process origin");
      return origin;
    },
    originEnv,
    processEnv: (overrides = {}) => ({
      ...originEnv,
      AGENT_GATEWAY_ENABLED: "true",
      DATABASE_URL: db.url,
      CHAIN_RPC_URL: devnet.url,
      ...overrides,
    }),
    treasury: treasury.value.faucetAddress,
    settler,
    payee,
    policy,
    backupDir,
    authorities,
    drill: (batchId) => driller.drill(db.handle.db, batchId),
    newAgent,
    newAgents: (count, agentOptions = {}) => makeAgents(agentDeps, count, agentOptions),
    async addFreeKeys(count) {
      await makeFreeKeys(agentDeps, count, { drilled: false });
    },
    startOrigin,
    async close() {
      for (const started of origins) await started.close();
      await driller.close();
      await signer.close();
      await enclave.dispose();
      await devnet.close();
      await db.drop();
      await rm(backupDir, { recursive: true, force: true });
      await rm(secretsDir, { recursive: true, force: true });
    },
  };
}

export type { StackAgent };

/** The enclave's own server on an initialised fixture, in this process, reading `now`. */
async function serveEnclaveHere(now: () => Date): Promise<EnclaveProcess> {
  const fixture = await createEnclaveFixture({ envId: "money-test", start: false });
  const server = await startEnclaveServer({
    socketPath: fixture.socketPath,
    dataDir: fixture.dataDir,
    logger: pino({ level: "silent" }),
    now,
    verifyStateJournal: true,
  });
  return {
    ...fixture,
    dispose: async () => {
      await server.close();
      await fixture.dispose();
    },
  };
}
