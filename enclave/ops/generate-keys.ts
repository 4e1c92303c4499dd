/** generate_keys (admin tier): a batch of fresh keys in one namespace, sealed in one atomic write. */
import { generateKeyMaterial } from "../keystore.ts";
import { refuse, succeed } from "../outcome.ts";
import { type OpHandler, publicInfo } from "./handler.ts";

/**
 * Idempotent per batch_id: a retry with the same namespace and count (under a fresh capability)
 * returns the keys already generated, so a lost reply never strands a batch. The same batch_id
 * with other parameters is refused.
 */
export const generateKeys: OpHandler<"generate_keys"> = async (ctx, params) => {
  if (ctx.keystore.isWriting(params.batch_id)) return refuse("malformed", "batch is being generated");
  const existing = ctx.keystore.batch(params.batch_id);
  if (existing) {
    if (existing.namespace !== params.namespace || existing.keys.length !== params.count) {
      return refuse("malformed", "batch_id already used with other parameters");
    }
    return succeed({
      batch_id: params.batch_id,
      namespace: params.namespace,
      keys: existing.keys.map(publicInfo),
    });
  }
  const entries = await ctx.keystore.add({
    namespace: params.namespace,
    batchId: params.batch_id,
    keys: generateKeyMaterial(params.count),
  });
  ctx.logger.info(
    { batch_id: params.batch_id, namespace: params.namespace, count: params.count },
    "keys generated",
  );
  return succeed({ batch_id: params.batch_id, namespace: params.namespace, keys: entries.map(publicInfo) });
};
