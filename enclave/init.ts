/**
 * `npm run enclave -- init`: creates the sealing key (0600) and seals the env id, chain id 77, the
 * authority public keys, the recovery encryption public key and a fresh random instance id beside
 * it, and makes the x402 payee key (payee-key.ts), whose address it reports. Refuses to run twice: a second init would orphan every key sealed under the first sealing key;
 * of two run at once, one initialises the folder and the other is refused.
 */
import { mkdir } from "node:fs/promises";
import pino from "pino";
import { CHAIN_ID } from "../shared/constants.ts";
import { fromHex, normaliseHex } from "../shared/hex.ts";
import { ENV_ID_PATTERN } from "../shared/identity-proof.ts";
import { hpkeSeal, RECOVERY_HPKE_INFO } from "../shared/recovery-envelope.ts";
import { writeNewFileAtomic } from "./atomic-file.ts";
import { backupSignerOf } from "./backup-envelope.ts";
import { type DataDirLayout, dataDirLayout } from "./data-dir.ts";
import { Keystore } from "./keystore.ts";
import { ensurePayeeKey } from "./payee-key.ts";
import {
  isEnclaveInitialised,
  randomInstanceId,
  readSealingKey,
  SEALED_CONFIG_VERSION,
  type SealedConfig,
  sealConfig,
} from "./sealed-config.ts";
import { generateSealingKey } from "./sealing.ts";
import { StateStore } from "./state-store.ts";

export type InitEnclaveParams = {
  dataDir: string;
  envId: string;
  /** Ed25519 public keys (32 bytes hex, with or without 0x). */
  adminAuthority: string;
  policyAuthority: string;
  recoveryAuthority: string;
  /** X25519 public key (32 bytes hex) of the offline recovery encryption key. */
  recoveryEncryptionKey: string;
  chainId?: number;
  now?: () => Date;
};

/** Thrown for an invalid argument or an already initialised data directory. */
export class InitError extends Error {
  override readonly name = "InitError";
}

/**
 * The sealed config `init` wrote, the address of the payee key it made, and the public key of
 * its backup signer (every backup envelope is signed by it; a recovery names it).
 */
export type InitEnclaveResult = SealedConfig & { payee_address: string; backup_signer: string };

/** Initialises a data directory; returns the sealed config it wrote and the payee key's address. */
export async function initEnclave(params: InitEnclaveParams): Promise<InitEnclaveResult> {
  if (!ENV_ID_PATTERN.test(params.envId)) throw new InitError("--env-id must match [a-z0-9-]{1,64}");
  const adminAuthority = parseAuthority(params.adminAuthority, "--admin-pubkey");
  const policyAuthority = parseAuthority(params.policyAuthority, "--policy-pubkey");
  const recoveryAuthority = parseAuthority(params.recoveryAuthority, "--recovery-pubkey");
  const recoveryEncryptionKey = await parseRecoveryEncryptionKey(params.recoveryEncryptionKey);
  if (new Set([adminAuthority, policyAuthority, recoveryAuthority]).size !== 3) {
    // The tiers only mean something if they are held by different keys (docs/enclave.md, "Keys and where
    // production keeps them").
    throw new InitError("the admin, policy and recovery authority keys must all differ");
  }
  const layout = dataDirLayout(params.dataDir);
  if (await isEnclaveInitialised(layout)) throw new InitError(`${params.dataDir} is already initialised`);
  await mkdir(layout.root, { recursive: true, mode: 0o700 });
  await mkdir(layout.keysDir, { recursive: true, mode: 0o700 });

  const sealingKey = await claimSealingKey(layout);
  const config: SealedConfig = {
    v: SEALED_CONFIG_VERSION,
    env_id: params.envId,
    chain_id: params.chainId ?? CHAIN_ID,
    admin_authority: adminAuthority,
    policy_authority: policyAuthority,
    recovery_authority: recoveryAuthority,
    recovery_encryption_key: recoveryEncryptionKey,
    // Never taken from the operator: two enclaves initialised alike must still differ here.
    instance_id: randomInstanceId(),
    created_at: (params.now ?? (() => new Date()))().toISOString(),
  };
  try {
    // The commit: of two inits at once only one seals its config, and only it goes on to make keys.
    await writeNewFileAtomic(layout.sealedConfig, sealConfig(sealingKey, config));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    throw new InitError(`${params.dataDir} is already initialised`);
  }
  const keystore = await Keystore.open(layout.keysDir, sealingKey, pino({ level: "silent" }));
  const state = await StateStore.open(layout.state, sealingKey);
  try {
    const payee = await ensurePayeeKey(keystore, state, new Date(config.created_at));
    return { ...config, payee_address: payee.address, backup_signer: backupSignerOf({ config, sealingKey }) };
  } finally {
    await state.close();
  }
}

/**
 * The folder's sealing key: a new one, or the one another init left there (one killed before it
 * sealed its config, or one running beside this one). Never written over: two inits at once each
 * wrote their own over the other's and sealed under their own, leaving a folder that unsealed
 * under neither key.
 */
async function claimSealingKey(layout: DataDirLayout): Promise<Uint8Array> {
  const sealingKey = generateSealingKey();
  try {
    await writeNewFileAtomic(layout.sealingKey, sealingKey);
    return sealingKey;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    return readSealingKey(layout);
  }
}

/**
 * The recovery encryption key must be a usable X25519 public key: HPKE refuses a low-order point
 * (an all-zero shared secret), so a trial seal at init catches it before any backup depends on it.
 */
async function parseRecoveryEncryptionKey(value: string): Promise<`0x${string}`> {
  const message = "--recovery-enc-pubkey must be a 32-byte X25519 public key in hex (ops/recovery-key.ts)";
  let key: `0x${string}`;
  try {
    key = normaliseHex(value, 32);
  } catch {
    throw new InitError(message);
  }
  try {
    await hpkeSeal(fromHex(key), RECOVERY_HPKE_INFO, new Uint8Array(0), new Uint8Array(0));
  } catch {
    throw new InitError(message);
  }
  return key;
}

function parseAuthority(value: string, flag: string): `0x${string}` {
  try {
    return normaliseHex(value, 32);
  } catch {
    throw new InitError(`${flag} must be a 32-byte Ed25519 public key in hex`);
  }
}
