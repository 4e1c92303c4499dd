/**
 * `npm run enclave -- init`: creates the sealing key (0600) and seals the env id, chain id 77 and
 * the authority public keys beside it. Refuses to run twice: a second init would orphan every key
 * sealed under the first sealing key.
 */
import { mkdir } from "node:fs/promises";
import { CHAIN_ID } from "../shared/constants.ts";
import { normaliseHex } from "../shared/hex.ts";
import { ENV_ID_PATTERN } from "../shared/identity-proof.ts";
import { writeFileAtomic } from "./atomic-file.ts";
import { dataDirLayout } from "./data-dir.ts";
import {
  isEnclaveInitialised,
  SEALED_CONFIG_VERSION,
  type SealedConfig,
  sealConfig,
} from "./sealed-config.ts";
import { generateSealingKey } from "./sealing.ts";

export type InitEnclaveParams = {
  dataDir: string;
  envId: string;
  /** Ed25519 public keys (32 bytes hex, with or without 0x). */
  adminAuthority: string;
  policyAuthority: string;
  recoveryAuthority: string;
  chainId?: number;
  now?: () => Date;
};

/** Thrown for an invalid argument or an already initialised data directory. */
export class InitError extends Error {
  override readonly name = "InitError";
}

/** Initialises a data directory; returns the sealed config it wrote. */
export async function initEnclave(params: InitEnclaveParams): Promise<SealedConfig> {
  if (!ENV_ID_PATTERN.test(params.envId)) throw new InitError("--env-id must match [a-z0-9-]{1,64}");
  const adminAuthority = parseAuthority(params.adminAuthority, "--admin-pubkey");
  const policyAuthority = parseAuthority(params.policyAuthority, "--policy-pubkey");
  const recoveryAuthority = parseAuthority(params.recoveryAuthority, "--recovery-pubkey");
  if (new Set([adminAuthority, policyAuthority, recoveryAuthority]).size !== 3) {
    // The tiers only mean something if they are held by different keys (DESIGN §5 "Ops and tiers").
    throw new InitError("the admin, policy and recovery authority keys must all differ");
  }
  const layout = dataDirLayout(params.dataDir);
  if (await isEnclaveInitialised(layout)) throw new InitError(`${params.dataDir} is already initialised`);
  await mkdir(layout.root, { recursive: true, mode: 0o700 });
  await mkdir(layout.keysDir, { recursive: true, mode: 0o700 });

  const sealingKey = generateSealingKey();
  const config: SealedConfig = {
    v: SEALED_CONFIG_VERSION,
    env_id: params.envId,
    chain_id: params.chainId ?? CHAIN_ID,
    admin_authority: adminAuthority,
    policy_authority: policyAuthority,
    recovery_authority: recoveryAuthority,
    created_at: (params.now ?? (() => new Date()))().toISOString(),
  };
  await writeFileAtomic(layout.sealingKey, sealingKey);
  await writeFileAtomic(layout.sealedConfig, sealConfig(sealingKey, config));
  return config;
}

function parseAuthority(value: string, flag: string): `0x${string}` {
  try {
    return normaliseHex(value, 32);
  } catch {
    throw new InitError(`${flag} must be a 32-byte Ed25519 public key in hex`);
  }
}
