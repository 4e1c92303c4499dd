import { callJson, type FetchLike } from "./request.ts";
import type { RegisterResponse } from "./wire.ts";

export type RegisterParams = {
  /** The service's base URL, chain segment included: `https://host/77`. */
  baseUrl: string;
  fetch?: FetchLike;
};

/**
 * POST {base}/agent/v1/register: a new token and an empty assigned wallet. Called once, never
 * retried (a lost answer may already have created the identity, and the token is shown
 * once). Store the token before anything else.
 */
export async function register(params: RegisterParams): Promise<RegisterResponse> {
  const answer = await callJson<RegisterResponse>(
    params.fetch ?? globalThis.fetch.bind(globalThis),
    params.baseUrl,
    {
      method: "POST",
      path: "/agent/v1/register",
      headers: { "x-svc-registration": "1" },
      body: {},
    },
  );
  return answer.body;
}
