/**
 * The enclave service: loads the sealed config, keystore and state from the data directory and
 * listens on a Unix-domain socket created with mode 0600. `startEnclaveServer` is also
 * the in-code API for tests; acceptance tests run the real process through `main.ts`.
 */
import { chmod, mkdir, rm, stat } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { dirname } from "node:path";
import type { Logger } from "pino";
import { ENCLAVE_PROFILE } from "../shared/constants.ts";
import { serveConnection } from "./connection.ts";
import type { EnclaveContext } from "./context.ts";
import { type DataDirLayout, dataDirLayout } from "./data-dir.ts";
import { handleRequest } from "./dispatch.ts";
import { HeldRecoveryKey } from "./held-recovery-key.ts";
import { Keystore } from "./keystore.ts";
import { createEnclaveLogger } from "./logger.ts";
import { ensurePayeeKey } from "./payee-key.ts";
import { RecentSettlements } from "./recent-settlements.ts";
import {
  isEnclaveInitialised,
  type ReadSealedConfigResult,
  readSealedConfig,
  readSealingKey,
  SealedConfigOutdatedError,
} from "./sealed-config.ts";
import { type ServeLock, takeServeLock } from "./serve-lock.ts";
import { socketAccepts } from "./socket-probe.ts";
import { StateStore } from "./state-store.ts";
import { TransportKeys } from "./transport-keys.ts";

export type StartEnclaveServerParams = {
  socketPath: string;
  dataDir: string;
  /** Announced profile; only tests set another one, to show the client refusing it. */
  announcedProfile?: string;
  /**
   * 0o600 by default: only the enclave's own user connects. 0o660 when the origin runs as another
   * user in the socket's group (docs/operations.md, the service units), so the origin never gets
   * the enclave user's access to the sealing key.
   */
  socketMode?: 0o600 | 0o660;
  /** Check each state journal record against the state in memory (tests: StateStoreOptions). */
  verifyStateJournal?: boolean;
  logger?: Logger;
  now?: () => Date;
};

export type EnclaveServer = {
  socketPath: string;
  envId: string;
  close: () => Promise<void>;
};

/** Thrown when the data directory is not initialised or the socket is held by a live enclave. */
export class EnclaveStartError extends Error {
  override readonly name = "EnclaveStartError";
}

/** Loads state and starts listening; resolves once the socket accepts connections. */
export async function startEnclaveServer(params: StartEnclaveServerParams): Promise<EnclaveServer> {
  const logger = params.logger ?? createEnclaveLogger();
  const layout = dataDirLayout(params.dataDir);
  if (!(await isEnclaveInitialised(layout))) {
    throw new EnclaveStartError(
      `${params.dataDir} is not initialised: run \`npm run enclave -- init\` first`,
    );
  }
  const lock = await takeServeLock(params.dataDir);
  if (!lock.held && lock.reason === "taken") {
    throw new EnclaveStartError(
      `another enclave is serving ${params.dataDir}: stop it first (two enclaves on one folder ` +
        "would each write its state over the other's, and every limit would hold once per enclave)",
    );
  }
  if (!lock.held) logger.warn("this platform cannot lock the data folder: serve it from one enclave only");
  try {
    return await serveLocked(params, layout, logger, lock.held ? lock.lock : null);
  } catch (error) {
    if (lock.held) await lock.lock.release();
    throw error;
  }
}

/** The rest of the start, once this process alone serves the folder. */
async function serveLocked(
  params: StartEnclaveServerParams,
  layout: DataDirLayout,
  logger: Logger,
  lock: ServeLock | null,
): Promise<EnclaveServer> {
  if (((await stat(layout.sealingKey)).mode & 0o077) !== 0) {
    // Like ssh with a private key: a sealing key others can read is not sealing anything.
    throw new EnclaveStartError(`${layout.sealingKey} must not be readable by group or others (chmod 600)`);
  }
  const sealingKey = await readSealingKey(layout);
  const { config, upgraded } = await readConfigOrExplain(params.dataDir, layout, sealingKey);
  if (upgraded) {
    logger.warn(
      { instance_id: config.instance_id },
      "sealed config upgraded to v4 with a new instance id: capabilities minted before are refused",
    );
  }
  const ctx: EnclaveContext = {
    config,
    keystore: await Keystore.open(layout.keysDir, sealingKey, logger),
    state: await StateStore.open(layout.state, sealingKey, {
      verifyJournal: params.verifyStateJournal ?? false,
    }),
    sealingKey,
    transportKeys: new TransportKeys(),
    recoveryKey: new HeldRecoveryKey(),
    settlements: new RecentSettlements(),
    now: params.now ?? (() => new Date()),
    logger,
  };
  // `init` made it; a data folder initialised before payee keys existed gets its own now.
  const payee = await ensurePayeeKey(ctx.keystore, ctx.state, ctx.now());

  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    serveConnection(socket, {
      announcedProfile: params.announcedProfile ?? ENCLAVE_PROFILE,
      handle: (frame) => handleRequest(ctx, frame),
      logger,
    });
  });
  await prepareSocketPath(params.socketPath);
  await listen(server, params.socketPath, params.socketMode ?? 0o600);
  logger.info(
    {
      socket: params.socketPath,
      env_id: config.env_id,
      chain_id: config.chain_id,
      instance_id: config.instance_id,
      payee_address: payee.address,
    },
    "enclave listening",
  );

  let closed: Promise<void> | null = null;
  const close = (): Promise<void> => {
    closed ??= (async () => {
      const stopped = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const socket of sockets) socket.destroy();
      await stopped;
      await ctx.state.close();
      await rm(params.socketPath, { force: true });
      // Only once the state is closed: no write of this process can follow the next one's start.
      await lock?.release();
      logger.info("enclave stopped");
    })();
    return closed;
  };
  return { socketPath: params.socketPath, envId: config.env_id, close };
}

/** The sealed config, or a start error that tells the operator how to re-initialise an old folder. */
async function readConfigOrExplain(
  dataDir: string,
  layout: DataDirLayout,
  sealingKey: Uint8Array,
): Promise<ReadSealedConfigResult> {
  try {
    return await readSealedConfig(layout, sealingKey);
  } catch (error) {
    if (!(error instanceof SealedConfigOutdatedError)) throw error;
    const missing =
      error.version === 1
        ? "the policy authority existed, so its policy would still be settable with the origin's admin key"
        : "the recovery encryption key existed, so its backups open only with its own sealing key and die with it";
    throw new EnclaveStartError(
      `${dataDir} was initialised before ${missing}; this enclave refuses to serve it. ` +
        "Re-initialise: move the data folder away, create the offline keys " +
        "(npm run enclave-authority -- --out FILE for each authority, " +
        "npm run recovery-key -- --out FILE for the recovery encryption key) and run " +
        "`npm run enclave -- init --env-id … --admin-pubkey … --policy-pubkey … --recovery-pubkey … " +
        "--recovery-enc-pubkey …` (local stack: rm -rf .data, then npm start).",
    );
  }
}

/** Removes a stale socket file, but refuses to steal one a live enclave is listening on. */
async function prepareSocketPath(socketPath: string): Promise<void> {
  await mkdir(dirname(socketPath), { recursive: true, mode: 0o700 });
  try {
    await stat(socketPath);
  } catch {
    return;
  }
  if (await socketAccepts(socketPath))
    throw new EnclaveStartError(`another enclave is listening on ${socketPath}`);
  await rm(socketPath, { force: true });
}

/** Listens with a umask that creates the socket 0600 from the start (no window at a wider mode). */
async function listen(server: Server, socketPath: string, mode: 0o600 | 0o660): Promise<void> {
  const previous = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(socketPath, () => {
        server.off("error", reject);
        resolve();
      });
    });
  } finally {
    process.umask(previous);
  }
  // Widened, if at all, only once listening: never wider than the operator asked.
  await chmod(socketPath, mode);
}
