/** Layout of the enclave data directory (all files 0600, the directory 0700). */
import { join } from "node:path";

export type DataDirLayout = {
  root: string;
  sealingKey: string;
  sealedConfig: string;
  state: string;
  keysDir: string;
};

/** Paths of the files the enclave keeps under `root`. */
export function dataDirLayout(root: string): DataDirLayout {
  return {
    root,
    sealingKey: join(root, "sealing.key"),
    sealedConfig: join(root, "enclave.sealed"),
    state: join(root, "state.sealed"),
    keysDir: join(root, "keys"),
  };
}
