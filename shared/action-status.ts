/**
 * The kinds and statuses of an agent action, and when one has ended (docs/api.md, "Faucet and
 * transfer actions: states"). Apart from the wire schemas (gateway-schemas.ts) so that the client
 * package can read them without zod. Runtime-neutral: no `node:` imports.
 */

/**
 * `filler`: a zero-value transfer from the agent's wallet to itself that the service signed in place
 * of one of its stuck transactions (docs/api.md#faucet-and-transfer-actions-states); its fee is paid
 * by the wallet and counts against the daily limit.
 */
export const ACTION_KINDS = ["faucet", "transfer", "x402", "filler"] as const;
export const ACTION_STATUSES = [
  "requested",
  /** The agent's policy asks an operator's approval first (docs/agents.md#holds): nothing signed. */
  "held",
  /** An operator approved a held action: it is signed next, as a requested one is. */
  "approved",
  /** An operator rejected a held action: never signed. */
  "rejected",
  /** A held action nobody approved in time: never signed. */
  "expired",
  "signed",
  "submitted",
  "confirmed",
  "failed",
  "reverted",
] as const;
export type ActionStatus = (typeof ACTION_STATUSES)[number];
/** Statuses after which an action never changes again. */
export const TERMINAL_ACTION_STATUSES: readonly ActionStatus[] = [
  "confirmed",
  "failed",
  "reverted",
  "rejected",
  "expired",
];

/**
 * Whether an action has reached its end. An x402 authorization ends once signed: it is never
 * submitted by us, the payee's facilitator settles it (docs/api.md, "Faucet and transfer actions: states").
 */
export function isTerminalAction(action: { kind: string; status: ActionStatus }): boolean {
  if (action.kind === "x402" && action.status === "signed") return true;
  return TERMINAL_ACTION_STATUSES.includes(action.status);
}
