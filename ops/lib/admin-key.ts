/**
 * The admin authority key the origin holds (AGENT_ADMIN_AUTHORITY_KEY_FILE), for the operator tools
 * that seal what the origin's own tier may: an agent's policy tightened, a passkey revoked.
 */
import { existsSync } from "node:fs";
import type { Config } from "../../origin/config.ts";
import { readAuthoritySecret } from "../../origin/signer/capability-minter.ts";
import { readArgumentFile, UsageError } from "./cli-shell.ts";

/** The local stack's admin key (dev/local-enclave.ts), used when the node names none. */
const LOCAL_ADMIN_KEY_FILE = ".data/admin-authority.key";

/** The node's admin authority key, or the local stack's; a usage error when there is neither. */
export async function readAdminKey(config: Config): Promise<Uint8Array> {
  const file =
    config.signer.adminAuthorityKeyFile ??
    (existsSync(LOCAL_ADMIN_KEY_FILE) ? LOCAL_ADMIN_KEY_FILE : undefined);
  if (!file) {
    throw new UsageError(
      "no admin authority key: set AGENT_ADMIN_AUTHORITY_KEY_FILE as the origin has it (the local stack's is found in .data/)",
    );
  }
  return readArgumentFile("AGENT_ADMIN_AUTHORITY_KEY_FILE", file, "a 32-byte hex seed", readAuthoritySecret);
}
