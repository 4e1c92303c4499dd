import { type CustomTransport, custom } from "viem";
import { JSON_RPC_ANSWER } from "./answer-shapes.ts";
import { RpcError, RpcMethodNotAllowed } from "./errors.ts";
import { callJson, type FetchLike } from "./request.ts";

export type RpcDeps = { fetch: FetchLike; baseUrl: string; token: string };

/** JSON-RPC -32601, the gateway's answer to a method off its read allowlist. */
const METHOD_NOT_ALLOWED = -32601;

let nextId = 1;

/** One call through POST /agent/v1/rpc; a JSON-RPC error becomes RpcError (RpcMethodNotAllowed). */
export async function rpcCall<T = unknown>(
  deps: RpcDeps,
  method: string,
  params: readonly unknown[] = [],
): Promise<T> {
  const id = nextId++;
  // An answer with neither a result nor an error is UnexpectedAnswer (callJson's shape).
  const answer = await callJson(deps.fetch, deps.baseUrl, {
    method: "POST",
    path: "/agent/v1/rpc",
    token: deps.token,
    body: { jsonrpc: "2.0", id, method, params },
    shape: JSON_RPC_ANSWER,
  });
  const body = answer.body;
  if (body.error) {
    const ErrorClass = body.error.code === METHOD_NOT_ALLOWED ? RpcMethodNotAllowed : RpcError;
    throw new ErrorClass(`${method}: ${body.error.message}`, {
      code: body.error.code === METHOD_NOT_ALLOWED ? "rpc_method_not_allowed" : "rpc_error",
      status: answer.status,
      rpcCode: body.error.code,
      data: body.error.data,
    });
  }
  return body.result as T;
}

/**
 * A viem transport over the gateway's /rpc with the agent's token:
 * `createPublicClient({ chain: chain77(url), transport: gatewayTransport(deps) })`.
 * viem does not retry here (a refused method would be refused again); a gateway error reaches the
 * caller as viem's error with the client's typed error as its `cause` (findGatewayError finds it).
 */
export function gatewayTransport(deps: RpcDeps): CustomTransport {
  return custom(
    { request: ({ method, params }) => rpcCall(deps, method, Array.isArray(params) ? params : []) },
    { key: "agent-gateway", name: "Agent gateway /rpc", retryCount: 0 },
  );
}
