import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { readLocalJson, writeLocalJson } from "./local-files.ts";

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
  if (existsSync(file)) {
    return readLocalJson<LocalSecrets>(
      file,
      "delete it to make new secrets (the admin API token and the edge's secret change with them)",
    );
  }
  const secrets: LocalSecrets = {
    registrationIpSecret: randomBytes(32).toString("hex"),
    registrationAdminSecret: randomBytes(32).toString("hex"),
    edgeSharedSecret: randomBytes(32).toString("hex"),
    adminApiToken: randomBytes(32).toString("hex"),
  };
  await mkdir(dataDir, { recursive: true });
  await writeLocalJson(file, secrets);
  return secrets;
}
