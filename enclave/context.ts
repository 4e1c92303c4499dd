/** Everything an op handler needs, built once at start (STYLE: dependencies are passed). */
import type { Logger } from "pino";
import type { HeldRecoveryKey } from "./held-recovery-key.ts";
import type { Keystore } from "./keystore.ts";
import type { RecentSettlements } from "./recent-settlements.ts";
import type { SealedConfig } from "./sealed-config.ts";
import type { StateStore } from "./state-store.ts";
import type { TransportKeys } from "./transport-keys.ts";

export type EnclaveContext = {
  config: SealedConfig;
  keystore: Keystore;
  state: StateStore;
  /** Needed only to derive the backup key; never logged, never sent. */
  sealingKey: Uint8Array;
  /** In-memory transport keys of restores into this enclave. */
  transportKeys: TransportKeys;
  /** The recovery encryption key while a restore session holds it (load_recovery_key). */
  recoveryKey: HeldRecoveryKey;
  /** The settlements the settler key signed here, which a receipt may name (in memory only). */
  settlements: RecentSettlements;
  now: () => Date;
  logger: Logger;
};
