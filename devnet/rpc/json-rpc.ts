/**
 * JSON-RPC 2.0 envelopes: request validation, single and batch dispatch, error objects with
 * geth's codes. Transport-free; server.ts carries it over HTTP.
 */

export type JsonRpcId = string | number | null;

export type JsonRpcErrorObject = { code: number; message: string; data?: unknown };

export type JsonRpcResponse =
  | { jsonrpc: "2.0"; id: JsonRpcId; result: unknown }
  | { jsonrpc: "2.0"; id: JsonRpcId; error: JsonRpcErrorObject };

export const RPC_ERROR_CODES = {
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  invalidParams: -32602,
  internalError: -32603,
  /** geth's catch-all for a request it understood but refused (nonce too low, header not found…). */
  serverError: -32000,
  /** geth: eth_call or eth_estimateGas reverted; `data` carries the revert data. */
  executionReverted: 3,
} as const;

/** Thrown by method handlers (the wire layer of the devnet) and turned into an error response. */
export class RpcError extends Error {
  readonly code: number;
  readonly data: unknown;

  constructor(code: number, message: string, data?: unknown) {
    super(message);
    this.name = "RpcError";
    this.code = code;
    this.data = data;
  }
}

export type RpcMethod = (params: readonly unknown[]) => unknown;
export type RpcMethods = ReadonlyMap<string, RpcMethod>;

/** geth's default batch limit (--rpc.batch-request-limit). */
export const MAX_BATCH_LENGTH = 1000;

/**
 * Answers one parsed payload: an object or a batch. Undefined when nothing is owed (only
 * notifications). `onInternalError` hears about handler bugs, which the client sees as -32603. A
 * batch of more than `maxBatchLength` calls is refused whole, with one error object, as geth and
 * hosted nodes that cap batches answer it.
 */
export async function dispatch(
  payload: unknown,
  methods: RpcMethods,
  onInternalError: (method: string, error: unknown) => void,
  maxBatchLength = MAX_BATCH_LENGTH,
): Promise<JsonRpcResponse | JsonRpcResponse[] | undefined> {
  if (!Array.isArray(payload)) return answer(payload, methods, onInternalError);
  if (payload.length === 0) return failure(null, RPC_ERROR_CODES.invalidRequest, "empty batch");
  if (payload.length > maxBatchLength) {
    return failure(null, RPC_ERROR_CODES.invalidRequest, `batch too large (max ${maxBatchLength})`);
  }
  // Started in order, so calls that take the chain lock queue in the order the batch lists them.
  const responses = await Promise.all(payload.map((item) => answer(item, methods, onInternalError)));
  const owed = responses.filter((response): response is JsonRpcResponse => response !== undefined);
  return owed.length === 0 ? undefined : owed;
}

export function failure(id: JsonRpcId, code: number, message: string, data?: unknown): JsonRpcResponse {
  const error: JsonRpcErrorObject = data === undefined ? { code, message } : { code, message, data };
  return { jsonrpc: "2.0", id, error };
}

async function answer(
  item: unknown,
  methods: RpcMethods,
  onInternalError: (method: string, error: unknown) => void,
): Promise<JsonRpcResponse | undefined> {
  if (typeof item !== "object" || item === null || Array.isArray(item)) {
    return failure(null, RPC_ERROR_CODES.invalidRequest, "invalid request");
  }
  const request = item as Record<string, unknown>;
  const rawId = request.id;
  const id: JsonRpcId = typeof rawId === "string" || typeof rawId === "number" ? rawId : null;
  if (rawId !== undefined && rawId !== null && id === null) {
    return failure(null, RPC_ERROR_CODES.invalidRequest, "invalid request id");
  }
  const notification = !("id" in request);
  if (request.jsonrpc !== "2.0" || typeof request.method !== "string") {
    return failure(id, RPC_ERROR_CODES.invalidRequest, "invalid request");
  }
  const params = request.params ?? [];
  if (!Array.isArray(params)) return failure(id, RPC_ERROR_CODES.invalidParams, "non-array args");
  const method = methods.get(request.method);
  if (method === undefined) {
    if (notification) return undefined;
    return failure(
      id,
      RPC_ERROR_CODES.methodNotFound,
      `the method ${request.method} does not exist/is not available`,
    );
  }
  try {
    const result = await method(params);
    return notification ? undefined : { jsonrpc: "2.0", id, result: result ?? null };
  } catch (error) {
    if (notification) return undefined;
    if (error instanceof RpcError) return failure(id, error.code, error.message, error.data);
    onInternalError(request.method, error);
    return failure(id, RPC_ERROR_CODES.internalError, "internal error");
  }
}
