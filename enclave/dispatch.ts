/**
 * One request in, one response out. Order of checks: envelope,
 * known op, params schema, capability (privileged ops), then the op. Anything refused before the
 * op runs changes no state; an accepted capability's counter is made durable before the op runs,
 * so a replay after a crash is still refused.
 */
import { ENCLAVE_OP_SCHEMAS } from "../shared/enclave-ops.ts";
import {
  ENCLAVE_WIRE_VERSION,
  type EnclaveFailure,
  type EnclaveResponse,
  isEnclaveOp,
  isPrivilegedOp,
  type RequestId,
  requestIdSchema,
  requestSchema,
} from "../shared/enclave-protocol.ts";
import { errorMessage } from "../shared/error-message.ts";
import { checkCapability } from "./capability-check.ts";
import type { EnclaveContext } from "./context.ts";
import { OP_HANDLERS } from "./ops/index.ts";
import { type OpOutcome, refuse } from "./outcome.ts";
import { SealError } from "./sealing.ts";

type AnyHandler = (ctx: EnclaveContext, params: unknown) => OpOutcome<unknown> | Promise<OpOutcome<unknown>>;

/** Handles one decoded request frame; never throws. */
export async function handleRequest(ctx: EnclaveContext, frame: unknown): Promise<EnclaveResponse> {
  const request = requestSchema.safeParse(frame);
  if (!request.success)
    return failure(extractId(frame), { code: "malformed", reason: "invalid request envelope" });
  const { id, op, params, cap } = request.data;
  if (!isEnclaveOp(op)) return failure(id, { code: "malformed", reason: "unknown op" });
  const parsed = ENCLAVE_OP_SCHEMAS[op].params.safeParse(params);
  if (!parsed.success) return failure(id, { code: "malformed", reason: "invalid params" });

  try {
    if (isPrivilegedOp(op)) {
      const accepted = checkCapability(ctx.config, ctx.state.state, op, params, cap);
      if (!accepted) return failure(id, refuse("capability_rejected", "capability rejected").error);
      await ctx.state.commit((state) => {
        state.counters.set(accepted.counterKey, accepted.counter);
      });
      ctx.logger.info(
        { op, request_id: accepted.cap.request_id, scope: accepted.cap.scope, counter: accepted.counter },
        "capability accepted",
      );
    }
    const handler = OP_HANDLERS[op] as AnyHandler;
    const outcome = await handler(ctx, parsed.data);
    if (outcome.ok) return { v: ENCLAVE_WIRE_VERSION, id, ok: true, result: outcome.value };
    return failure(id, outcome.error);
  } catch (error) {
    if (error instanceof SealError) {
      ctx.logger.error({ op, err: error.message }, "sealed write failed");
      return failure(id, { code: "seal_failed", reason: "sealed storage failed" });
    }
    // A bug, not an expected refusal: log it and answer with the storage code rather than crash.
    ctx.logger.error({ op, err: errorMessage(error) }, "op failed");
    return failure(id, { code: "seal_failed", reason: "internal error" });
  }
}

/** The response to a frame that did not decode or was oversize. */
export function malformedFrameResponse(reason: string): EnclaveResponse {
  return failure(null, { code: "malformed", reason });
}

function failure(id: RequestId | null, error: EnclaveFailure): EnclaveResponse {
  return { v: ENCLAVE_WIRE_VERSION, id, ok: false, error };
}

function extractId(frame: unknown): RequestId | null {
  if (typeof frame !== "object" || frame === null || !("id" in frame)) return null;
  const id = requestIdSchema.safeParse(frame.id);
  return id.success ? id.data : null;
}
