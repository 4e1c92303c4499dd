/** Everything an op handler needs, built once at start (STYLE: dependencies are passed). */
import type { Logger } from "pino";
import type { Keystore } from "./keystore.ts";
import type { SealedConfig } from "./sealed-config.ts";
import type { StateStore } from "./state-store.ts";

export type EnclaveContext = {
  config: SealedConfig;
  keystore: Keystore;
  state: StateStore;
  /** Needed only to derive the backup key; never logged, never sent. */
  sealingKey: Uint8Array;
  now: () => Date;
  logger: Logger;
};
