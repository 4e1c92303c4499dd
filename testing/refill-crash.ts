/**
 * Fault-injection child for the key-pool crash test: runs one refill batch against a real
 * database and enclave and SIGKILLs itself between the temporary backup write and the rename,
 * the one crash point that cannot be reached from outside at the right instant.
 * Env: DATABASE_URL, ENCLAVE_SOCKET, ADMIN_KEY_FILE, ENV_ID, BACKUP_DIR.
 */
import pino from "pino";
import { createBackupStore, nodeBackupFiles } from "../origin/backup-store.ts";
import { connectDatabase } from "../origin/db/client.ts";
import { makeBatch } from "../origin/keypool/refill.ts";
import { createCapabilityMinter } from "../origin/signer/capability-minter.ts";
import { createSignerClient } from "../origin/signer/create-signer-client.ts";

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

const database = connectDatabase({ url: env("DATABASE_URL"), maxConnections: 1 });
const signer = createSignerClient({ endpoint: `unix://${env("ENCLAVE_SOCKET")}`, liveIdentityEnabled: true });
const authorize = createCapabilityMinter({
  authority: { keyPath: env("ADMIN_KEY_FILE") },
  envId: env("ENV_ID"),
  client: signer,
});
await makeBatch(
  {
    db: database.db,
    signer,
    authorize,
    backupDir: env("BACKUP_DIR"),
    logger: pino({ level: "silent" }),
    // The disk the child writes to kills it once the temporary file is durable, before the rename.
    backups: createBackupStore({
      ...nodeBackupFiles,
      rename: async () => void process.kill(process.pid, "SIGKILL"),
    }),
  },
  4,
);
throw new Error("unreachable: the process should have been killed");
