/** export_backup (admin), verify_backup (no capability), restore_backup (recovery tier). */
import { randomBytes } from "node:crypto";
import { buildBackupEnvelope, openBackupEnvelope } from "../backup-envelope.ts";
import { materialFromPrivateKey, randomKeyRef } from "../keystore.ts";
import { KEY_NOT_USABLE, refuse, succeed } from "../outcome.ts";
import { type OpHandler, publicInfo } from "./handler.ts";

/** Exports exactly the keys of one batch; any other set is refused like an unknown key. */
export const exportBackup: OpHandler<"export_backup"> = (ctx, params) => {
  const batch = ctx.keystore.batch(params.batch_id);
  if (!batch) return KEY_NOT_USABLE;
  const requested = new Set(params.key_refs);
  if (requested.size !== params.key_refs.length) return refuse("malformed", "duplicate key_ref");
  const batchRefs = new Set(batch.keys.map((key) => key.keyRef));
  const sameSet = requested.size === batchRefs.size && params.key_refs.every((ref) => batchRefs.has(ref));
  if (!sameSet) return KEY_NOT_USABLE;
  const built = buildBackupEnvelope(ctx, {
    batchId: params.batch_id,
    namespace: batch.namespace,
    keys: batch.keys,
  });
  ctx.logger.info({ batch_id: params.batch_id, keys: batch.keys.length }, "backup exported");
  return succeed({ batch_id: params.batch_id, envelope: built.envelope, sha256: built.sha256 });
};

/** Decrypts and checks that every key reproduces its public key; stores nothing. */
export const verifyBackup: OpHandler<"verify_backup"> = (ctx, params) => {
  const opened = openBackupEnvelope(ctx, params.envelope);
  if (!opened.ok) return opened;
  return succeed({
    batch_id: opened.result.batchId,
    namespace: opened.result.namespace,
    keys: opened.result.keys.map((key) => ({
      key_ref: key.keyRef,
      public_key: key.publicKeyHex,
      address: key.address,
    })),
  });
};

/**
 * Restores into a fresh scratch namespace under new key_refs (DESIGN §8 restore drill): the copies
 * can be inspected and proven but never used to sign a transfer, faucet payout or x402 payment.
 */
export const restoreBackup: OpHandler<"restore_backup"> = async (ctx, params) => {
  const opened = openBackupEnvelope(ctx, params.envelope);
  if (!opened.ok) return opened;
  const namespace = `scratch-${randomBytes(8).toString("hex")}`;
  const sources = opened.result.keys;
  const copies = sources.map((key) => materialFromPrivateKey(key.privateKey, randomKeyRef()));
  const entries = await ctx.keystore.add({ namespace, batchId: opened.result.batchId, keys: copies });
  ctx.logger.info({ batch_id: opened.result.batchId, namespace, keys: entries.length }, "backup restored");
  return succeed({
    namespace,
    batch_id: opened.result.batchId,
    keys: entries.map((entry, index) => ({ ...publicInfo(entry), source_key_ref: sources[index]!.keyRef })),
  });
};
