/**
 * The agent's TypeScript client of the gateway (docs/agents.md): the package `agent-wallet-client`
 * (client/package.json, built by client/build.mjs), and `agent-wallet-service/client` inside this
 * repository. No Node-only APIs (fetch and Web Crypto only): it runs in Node, a Worker or a browser.
 */
export { chain77 } from "../shared/chain.ts";
export * from "./errors.ts";
export { type EventsParams, isActionEvent } from "./events.ts";
export {
  type ActionParams,
  type CheckPolicyParams,
  createGatewayClient,
  findGatewayError,
  type GatewayClient,
  type GatewayClientParams,
  type HeldAction,
  isHeld,
  type MoneyActionResult,
  type PolicyPatch,
  type TransferParams,
  type WaitForActionParams,
} from "./gateway-client.ts";
export { type ProofProgress, type RegisterParams, register } from "./register.ts";
export type { FetchLike } from "./request.ts";
export { gatewayTransport, rpcCall } from "./viem-transport.ts";
export type {
  ActionEvent,
  ActionEventType,
  ActionStatus,
  ActionView,
  AgentEvent,
  AgentPolicyDocument,
  BalanceResponse,
  Capability,
  NetworkResponse,
  OtherAgentEvent,
  PolicyBudget,
  PolicyCheckResult,
  PolicyResponse,
  RegisterResponse,
  TokenRotation,
} from "./wire.ts";
export {
  type AuthorizeX402Params,
  type FetchWithPaymentOptions,
  nonceForKey,
  PAYMENT_REQUIRED_HEADER,
  PAYMENT_RESPONSE_HEADER,
  PAYMENT_SIGNATURE_HEADER,
  type PaymentRequired,
  type PaymentRequirements,
  type PaymentSettlement,
  paidAnswerText,
  paymentSettlement,
  type X402Authorization,
} from "./x402.ts";
