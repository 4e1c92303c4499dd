/**
 * An x402 settlement's states (docs/x402.md#settlement-status): `claimed → submitted → settled`, or
 * `failed` (never mined: refused before or at broadcast) / `reverted` (mined with status 0). The
 * words of its status routes and of its events. Runtime-neutral: no `node:` imports.
 */
export const SETTLEMENT_STATES = ["claimed", "submitted", "settled", "failed", "reverted"] as const;
export type SettlementState = (typeof SETTLEMENT_STATES)[number];
