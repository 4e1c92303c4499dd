/**
 * capability_counter (no capability): the next contiguous counter for
 * (authority, this enclave's env, scope, op), so an authority holder can mint. Counters are not
 * secret and knowing one grants nothing without the authority key.
 */
import { capabilityCounterKey } from "../../shared/capability.ts";
import { succeed } from "../outcome.ts";
import type { OpHandler } from "./handler.ts";

export const capabilityCounter: OpHandler<"capability_counter"> = (ctx, params) => {
  const key = capabilityCounterKey(params.authority, ctx.config.env_id, params.scope, params.op);
  return succeed({ next_counter: (ctx.state.state.counters.get(key) ?? 0) + 1 });
};
