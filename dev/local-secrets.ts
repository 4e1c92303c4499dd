import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";

export type LocalSecrets = {
  registrationIpSecret: string;
  registrationAdminSecret: string;
  edgeSharedSecret: string;
  adminApiToken: string;
};

/**
 * The local stack's operator secrets: random, distinct, 32 bytes each, made on first start and
 * kept (0600) under the data folder so a restart keeps the same values.
 */
export async function loadOrCreateLocalSecrets(dataDir: string): Promise<LocalSecrets> {
  const file = path.join(dataDir, "local-secrets.json");
  if (existsSync(file)) return JSON.parse(await readFile(file, "utf8")) as LocalSecrets;
  const secrets: LocalSecrets = {
    registrationIpSecret: randomBytes(32).toString("hex"),
    registrationAdminSecret: randomBytes(32).toString("hex"),
    edgeSharedSecret: randomBytes(32).toString("hex"),
    adminApiToken: randomBytes(32).toString("hex"),
  };
  await mkdir(dataDir, { recursive: true });
  await writeFile(file, JSON.stringify(secrets, null, 2), { mode: 0o600 });
  return secrets;
}
