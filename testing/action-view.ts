/**
 * An action as the gateway answers it (GET /actions/{id}, a money request's 202), for tests whose
 * gateway is a stand-in (a loopback server answering a stalled or refusing request) and for the
 * formatters' tests: a transfer of 1,000 units, `requested`, with what a test names changed.
 */
import type { ActionView } from "../shared/gateway-schemas.ts";

export function actionView(changes: Partial<ActionView> = {}): ActionView {
  return {
    action_id: "00000000-0000-4000-8000-000000000001",
    kind: "transfer",
    status: "requested",
    tx_hash: null,
    amount: "1000",
    to: "0x1111111111111111111111111111111111111111",
    fee_wei: null,
    error_code: null,
    last_broadcast_error: null,
    replaced_by: null,
    rule: null,
    expires_at: null,
    created_at: "2026-01-01T00:00:00.000Z",
    updated_at: "2026-01-01T00:00:00.000Z",
    ...changes,
  };
}
