/** Layout of the enclave data directory (all files 0600, the directory 0700). */
import { join } from "node:path";
import type { StateSlotPaths } from "./state-slots.ts";

export type DataDirLayout = {
  root: string;
  sealingKey: string;
  sealedConfig: string;
  state: StateSlotPaths;
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
    },
    keysDir: join(root, "keys"),
  };
}
