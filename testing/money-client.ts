/** HTTP helpers for the money tests: the agent's side of the gateway, over real HTTP. */
import { randomBytes } from "node:crypto";
import type { ActionView } from "../shared/gateway-schemas.ts";
import { sleep } from "../shared/sleep.ts";
import { type SendParams, send, type TestResponse } from "./http.ts";

export type AgentCalls = {
  faucet(key?: string, extra?: SendParams): Promise<TestResponse>;
  transfer(body: Record<string, unknown>, extra?: SendParams): Promise<TestResponse>;
  /** POST /policy/check of a transfer: what it would meet now. */
  checkTransfer(transfer: { to: string; amount: string }): Promise<TestResponse>;
  action(actionId: string): Promise<TestResponse>;
  /** Polls the action until it ends (confirmed, failed, reverted, rejected, expired) or the timeout passes. */
  settled(actionId: string, timeoutMs?: number): Promise<ActionView>;
};

export const newKey = (): string => `key-${randomBytes(8).toString("hex")}`;

/**
 * A money request that went through: 202 while in flight, or 200 if its receipt was in before the
 * answer was (docs/api.md), with an action that did not fail.
 */
export function isAccepted(response: TestResponse): boolean {
  const status = (response.body as Partial<ActionView>).status;
  return (
    (response.status === 202 || response.status === 200) &&
    status !== "failed" &&
    status !== "reverted" &&
    status !== undefined
  );
}

export function agentCalls(base: string, token: string): AgentCalls {
  const headers = { authorization: `Bearer ${token}` };
  const post = (path: string, body: unknown, extra: SendParams = {}) =>
    send(`${base}/agent/v1${path}`, {
      method: "POST",
      body: typeof body === "string" ? body : JSON.stringify(body),
      ...extra,
      headers: { ...headers, ...extra.headers },
    });
  const action = (actionId: string) => send(`${base}/agent/v1/actions/${actionId}`, { headers });
  return {
    faucet: (key = newKey(), extra) => post("/faucet", { idempotency_key: key }, extra),
    transfer: (body, extra) => post("/transfers", body, extra),
    checkTransfer: (transfer) => post("/policy/check", { transfer }),
    action,
    async settled(actionId, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const response = await action(actionId);
        const view = response.body as ActionView;
        if (["confirmed", "failed", "reverted", "rejected", "expired"].includes(view.status)) return view;
        if (Date.now() > deadline) throw new Error(`action ${actionId} still ${view.status}`);
        await sleep(50);
      }
    },
  };
}
