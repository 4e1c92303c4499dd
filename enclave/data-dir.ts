/** Layout of the enclave data directory (all files 0600, the directory 0700). */
import { join } from "node:path";
import type { StatePaths } from "./state-store.ts";

export type DataDirLayout = {
  root: string;
  sealingKey: string;
  sealedConfig: string;
  state: StatePaths;
  keysDir: string;
};

/** Paths of the files the enclave keeps under `root`. */
export function dataDirLayout(root: string): DataDirLayout {
  return {
    root,
    sealingKey: join(root, "sealing.key"),
    sealedConfig: join(root, "enclave.sealed"),
    state: {
      slots: [join(root, "state.0.sealed"), join(root, "state.1.sealed")],
      legacy: join(root, "state.sealed"),
      journal: join(root, "state.journal"),
    },
    keysDir: join(root, "keys"),
  };
}
