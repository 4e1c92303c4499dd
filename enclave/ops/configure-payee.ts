/**
 * configure_payee (policy tier): keeps the payee key `init` made, or makes one, as configure_settler
 * does for the settler; with payee_key_ref it points the payee at that key of the `payee`
 * namespace, so a payee key restored after a recovery signs again under its old address, the one
 * the sealed policy and the quotes name (docs/operations.md#disaster-recovery).
 */
import { KEY_NOT_USABLE, succeed } from "../outcome.ts";
import { ensurePayeeKey } from "../payee-key.ts";
import type { OpHandler } from "./handler.ts";

export const configurePayee: OpHandler<"configure_payee"> = async (ctx, params) => {
  let key = params.payee_key_ref ? ctx.keystore.get(params.payee_key_ref) : undefined;
  if (params.payee_key_ref) {
    if (key?.namespace !== "payee") return KEY_NOT_USABLE;
    if (ctx.state.state.payeeKeyRef !== key.keyRef) {
      const chosen = key.keyRef;
      await ctx.state.commit((state) => {
        state.payeeKeyRef = chosen;
      });
    }
  } else {
    key = await ensurePayeeKey(ctx.keystore, ctx.state, ctx.now());
  }
  ctx.logger.info({ payee_address: key!.address }, "payee configured");
  return succeed({ payee_key_ref: key!.keyRef, payee_address: key!.address });
};
