/**
 * The enclave's sealed identity: env id, chain id, the admin, policy and recovery authority
 * public keys (docs/enclave.md, "Keys and where production keeps them") and the recovery encryption public
 * key every backup is sealed to (docs/operations.md "Disaster recovery"), fixed at `init` and sealed beside
 * the sealing key, with a random instance id that names this enclave instance alone. Capabilities and
 * identity proofs are checked against these values, never against anything a caller sends.
 */
import { randomBytes } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import * as z from "zod";
import { instanceIdSchema } from "../shared/capability.ts";
import { decodeCbor, encodeCbor } from "../shared/cbor-frame.ts";
import { ENV_ID_PATTERN } from "../shared/identity-proof.ts";
import { writeFileAtomic } from "./atomic-file.ts";
import type { DataDirLayout } from "./data-dir.ts";
import { SEAL_LABEL, SEALING_KEY_BYTES, SealError, seal, unseal } from "./sealing.ts";

const authorityKey = z.string().regex(/^0x[0-9a-f]{64}$/);

/**
 * Version 2 added the policy authority, version 3 the recovery encryption key, version 4 the
 * instance id every capability names (shared/capability.ts).
 */
export const SEALED_CONFIG_VERSION = 4;

const v3ConfigSchema = z.object({
  v: z.literal(3),
  env_id: z.string().regex(ENV_ID_PATTERN),
  chain_id: z.number().int().positive(),
  admin_authority: authorityKey,
  policy_authority: authorityKey,
  recovery_authority: authorityKey,
  /** X25519 public key (HPKE) of the offline recovery encryption key; its private half never enters. */
  recovery_encryption_key: authorityKey,
  created_at: z.string(),
});

export const sealedConfigSchema = v3ConfigSchema.extend({
  v: z.literal(SEALED_CONFIG_VERSION),
  /**
   * 16 random bytes drawn at `init`: a replacement initialised with the same env id and keys
   * draws another, so a capability minted for this instance is refused by every other one.
   */
  instance_id: instanceIdSchema,
});
export type SealedConfig = z.infer<typeof sealedConfigSchema>;

/** A fresh random instance id (16 bytes, 0x-hex). */
export function randomInstanceId(): string {
  return `0x${randomBytes(16).toString("hex")}`;
}

/** The shapes `init` sealed before: v1 had no policy authority, v2 no recovery encryption key. */
const outdatedConfigSchema = z.object({ v: z.union([z.literal(1), z.literal(2)]), env_id: z.string() });

/**
 * Thrown for a data folder sealed by an older `init`. It cannot be upgraded in place: adding an
 * authority or a recovery key to a sealed config would need no capability at all (the very hole
 * sealing the authorities at init closes), and the keys it holds have no backup a recovery key can open, so
 * the operator re-initialises.
 */
export class SealedConfigOutdatedError extends Error {
  override readonly name = "SealedConfigOutdatedError";
  constructor(readonly version: 1 | 2) {
    super(`sealed config v${version} is older than v3, the oldest this enclave serves`);
  }
}

/** Seals the config for writing to disk. */
export function sealConfig(sealingKey: Uint8Array, config: SealedConfig): Uint8Array {
  return seal(sealingKey, SEAL_LABEL.config, encodeCbor(config));
}

/** Reads the sealing key file; refuses a key of the wrong size. */
export async function readSealingKey(layout: DataDirLayout): Promise<Uint8Array> {
  const key = new Uint8Array(await readFile(layout.sealingKey));
  if (key.length !== SEALING_KEY_BYTES) throw new SealError("sealing key file has the wrong size");
  return key;
}

export type ReadSealedConfigResult = {
  config: SealedConfig;
  /** True when the folder was sealed by v3 and has just been given its instance id. */
  upgraded: boolean;
};

/**
 * Unseals and parses the config; throws SealedConfigOutdatedError for a version older than 3 and
 * SealError if it does not authenticate or parse. A v3 config is upgraded in place: it gets a
 * fresh random instance id and is sealed again as v4, atomically. Unlike adding an authority or a
 * recovery key, this needs no capability: a random id grants nothing to anyone, it only makes the
 * capabilities minted for other instances (and every v1 capability, which names none) worthless
 * here.
 */
export async function readSealedConfig(
  layout: DataDirLayout,
  sealingKey: Uint8Array,
): Promise<ReadSealedConfigResult> {
  const blob = new Uint8Array(await readFile(layout.sealedConfig));
  const decoded = decodeCbor(unseal(sealingKey, SEAL_LABEL.config, blob));
  const parsed = sealedConfigSchema.safeParse(decoded);
  if (parsed.success) return { config: parsed.data, upgraded: false };
  const v3 = v3ConfigSchema.safeParse(decoded);
  if (v3.success) {
    const config: SealedConfig = { ...v3.data, v: SEALED_CONFIG_VERSION, instance_id: randomInstanceId() };
    await writeFileAtomic(layout.sealedConfig, sealConfig(sealingKey, config));
    return { config, upgraded: true };
  }
  const outdated = outdatedConfigSchema.safeParse(decoded);
  if (outdated.success) throw new SealedConfigOutdatedError(outdated.data.v);
  throw new SealError("sealed config does not parse");
}

/** True once `init` has completed for this data directory. */
export async function isEnclaveInitialised(layout: DataDirLayout): Promise<boolean> {
  try {
    await stat(layout.sealedConfig);
    await stat(layout.sealingKey);
    return true;
  } catch {
    return false;
  }
}
