import { type CustomTransport, custom } from "viem";
import { RpcError, RpcMethodNotAllowed, ServiceUnavailable } from "./errors.ts";
import { callJson, type FetchLike } from "./request.ts";

export type RpcDeps = { fetch: FetchLike; baseUrl: string; token: string };

type RpcAnswer = {
  id?: unknown;
  result?: unknown;
  error?: { code: number; message: string; data?: unknown };
};

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
  const answer = await callJson<RpcAnswer>(deps.fetch, deps.baseUrl, {
    method: "POST",
    path: "/agent/v1/rpc",
    token: deps.token,
    body: { jsonrpc: "2.0", id, method, params },
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
  if (!("result" in body)) {
    throw new ServiceUnavailable(`${method}: the answer has neither result nor error`, {
      code: "unexpected_answer",
      status: answer.status,
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
