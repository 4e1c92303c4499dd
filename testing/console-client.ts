/** HTTP helpers for the operator console tests: the operator's side of the console API. */
import { randomBytes } from "node:crypto";
import { HEADER_ADMIN_API_TOKEN, HEADER_REGISTRATION_ADMIN_TOKEN } from "../shared/constants.ts";
import { type SendParams, send, type TestResponse } from "./http.ts";

/** The two console credentials, random and distinct, ≥ 32 bytes as the configuration requires. */
export function consoleSecrets(): { adminToken: string; changeToken: string; env: Record<string, string> } {
  const adminToken = randomBytes(32).toString("hex");
  const changeToken = randomBytes(32).toString("hex");
  return {
    adminToken,
    changeToken,
    env: { AGENT_ADMIN_API_TOKEN: adminToken, AGENT_REGISTRATION_ADMIN_SECRET: changeToken },
  };
}

export type ConsoleCalls = {
  get(path: string, extra?: SendParams): Promise<TestResponse>;
  post(path: string, body: unknown, extra?: SendParams): Promise<TestResponse>;
};

/** Calls `{base}/admin/agents{path}` with the given tokens (either may be omitted). */
export function consoleCalls(base: string, tokens: { admin?: string; change?: string }): ConsoleCalls {
  const headers: Record<string, string> = {};
  if (tokens.admin !== undefined) headers[HEADER_ADMIN_API_TOKEN] = tokens.admin;
  if (tokens.change !== undefined) headers[HEADER_REGISTRATION_ADMIN_TOKEN] = tokens.change;
  return {
    get: (path, extra = {}) =>
      send(`${base}/admin/agents${path}`, { ...extra, headers: { ...headers, ...extra.headers } }),
    post: (path, body, extra = {}) =>
      send(`${base}/admin/agents${path}`, {
        method: "POST",
        body: typeof body === "string" ? body : JSON.stringify(body),
        ...extra,
        headers: { ...headers, ...extra.headers },
      }),
  };
}

/** The error body without its request id: what must be the same for every wrong-token case. */
export function withoutRequestId(body: unknown): unknown {
  const error = (body as { error?: Record<string, unknown> }).error;
  if (!error) return body;
  const { request_id: _ignored, ...rest } = error;
  return { error: rest };
}
