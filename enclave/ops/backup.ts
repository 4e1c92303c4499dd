/**
 * export_backup (admin), verify_backup (no capability), restore_backup and load_recovery_key
 * (recovery tier), and the two unprivileged ops a restore into a new enclave needs:
 * new_transport_key and get_sealed_identity.
 */
import { KEY_NAMESPACES } from "../../shared/enclave-ops.ts";
import { fromHex, toHex } from "../../shared/hex.ts";
import {
  backupSignerOf,
  buildBackupEnvelope,
  loadRecoveryKey as loadSealedRecoveryKey,
  openBackupEnvelope,
  openRestorePackage,
  verifyBackupEnvelope,
} from "../backup-envelope.ts";
import { KEY_NOT_USABLE, refuse, succeed } from "../outcome.ts";
import { type OpHandler, publicInfo } from "./handler.ts";

/** Exports exactly the keys of one batch; any other set is refused like an unknown key. */
export const exportBackup: OpHandler<"export_backup"> = async (ctx, params) => {
  const batch = ctx.keystore.batch(params.batch_id);
  if (!batch) return KEY_NOT_USABLE;
  const namespace = KEY_NAMESPACES.find((known) => known === batch.namespace);
  if (!namespace) return KEY_NOT_USABLE;
  const requested = new Set(params.key_refs);
  if (requested.size !== params.key_refs.length) return refuse("malformed", "duplicate key_ref");
  const batchRefs = new Set(batch.keys.map((key) => key.keyRef));
  const sameSet = requested.size === batchRefs.size && params.key_refs.every((ref) => batchRefs.has(ref));
  if (!sameSet) return KEY_NOT_USABLE;
  const built = await buildBackupEnvelope(ctx, { batchId: params.batch_id, namespace, keys: batch.keys });
  ctx.logger.info({ batch_id: params.batch_id, keys: batch.keys.length }, "backup exported");
  return succeed({ batch_id: params.batch_id, envelope: built.envelope, sha256: built.sha256 });
};

/** Checks an envelope this enclave exported (backup-envelope.ts says what); stores nothing. */
export const verifyBackup: OpHandler<"verify_backup"> = (ctx, params) => {
  const opened = verifyBackupEnvelope(ctx, params.envelope);
  if (!opened.ok) return opened;
  return succeed({
    batch_id: opened.value.batchId,
    namespace: opened.value.namespace,
    keys: opened.value.keys.map((key) => ({
      key_ref: key.keyRef,
      public_key: key.publicKeyHex,
      address: key.address,
    })),
  });
};

/**
 * Imports the batch of a backup envelope (opened here with the loaded recovery key) or of a
 * restore package into its original namespace under its original key_refs, so the database's key
 * refs keep working in a new enclave. Re-restoring a batch is idempotent; a key_ref or batch id
 * that already holds something else is refused.
 */
export const restoreBackup: OpHandler<"restore_backup"> = async (ctx, params) => {
  const opened =
    "envelope" in params
      ? await openBackupEnvelope(ctx, params.envelope)
      : await openRestorePackage(ctx, params.package);
  if (!opened.ok) return opened;
  const { batchId, namespace, keys } = opened.value;
  const restored = await ctx.keystore.restore({ namespace, batchId, keys });
  if (!restored.ok) return refuse("malformed", restored.error);
  ctx.logger.info(
    { batch_id: batchId, namespace, keys: keys.length, imported: restored.value.imported },
    "backup restored",
  );
  return succeed({
    batch_id: batchId,
    namespace,
    keys: restored.value.entries.map(publicInfo),
    imported: restored.value.imported,
  });
};

/** Holds the recovery encryption key for one restore session (backup-envelope.ts says on what terms). */
export const loadRecoveryKey: OpHandler<"load_recovery_key"> = async (ctx, params) => {
  const loaded = await loadSealedRecoveryKey(ctx, {
    transportPublicKey: fromHex(params.transport_public_key),
    enc: fromHex(params.enc),
    ct: fromHex(params.ct),
  });
  if (!loaded.ok) return loaded;
  const expiresAt = loaded.value.expiresAt.toISOString();
  ctx.logger.info({ expires_at: expiresAt }, "recovery key loaded");
  return succeed({ recovery_encryption_key: ctx.config.recovery_encryption_key, expires_at: expiresAt });
};

/** A fresh transport key for one restore session; its private half stays in this process. */
export const newTransportKey: OpHandler<"new_transport_key"> = async (ctx) => {
  const created = await ctx.transportKeys.create(ctx.now());
  return succeed({
    transport_public_key: toHex(created.publicKey),
    env_id: ctx.config.env_id,
    chain_id: ctx.config.chain_id,
    expires_at: created.expiresAt.toISOString(),
  });
};

/** The sealed identity: env, chain, instance id and public keys only. */
export const getSealedIdentity: OpHandler<"get_sealed_identity"> = (ctx) =>
  succeed({
    env_id: ctx.config.env_id,
    chain_id: ctx.config.chain_id,
    instance_id: ctx.config.instance_id,
    admin_authority: ctx.config.admin_authority,
    policy_authority: ctx.config.policy_authority,
    recovery_authority: ctx.config.recovery_authority,
    recovery_encryption_key: ctx.config.recovery_encryption_key,
    backup_signer: backupSignerOf(ctx),
  });
