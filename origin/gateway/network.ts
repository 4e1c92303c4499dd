import type { Handler } from "hono";
import {
  API_VERSION,
  CAIP2_NETWORK,
  CHAIN_ID,
  NATIVE_DECIMALS,
  NATIVE_SYMBOL,
  RPC_MAX_BATCH,
  RPC_MAX_BATCH_BYTES,
  RPC_MAX_RESPONSE_BYTES,
  RPC_READ_ALLOWLIST,
} from "../../shared/constants.ts";
import type { LatestBlock } from "../chain/block-number.ts";
import type { Config } from "../config.ts";
import type { AppEnv } from "../http/env.ts";
import { PER_AGENT_REQUESTS, PRE_AUTH_FAILURES, RPC_IN_FLIGHT } from "./limits.ts";

/** GET /agent/v1/network: the contract an agent adapts to (docs/agents.md#reading; networkResponseSchema). */
export function networkHandler(config: Config, latestBlock: LatestBlock | undefined): Handler<AppEnv> {
  // Everything but the block and the caller is fixed for the life of the process.
  const fixed = {
    rpc: {
      allowed_methods: RPC_READ_ALLOWLIST,
      max_batch: RPC_MAX_BATCH,
      max_batch_bytes: RPC_MAX_BATCH_BYTES,
      max_response_bytes: RPC_MAX_RESPONSE_BYTES,
    },
    limits: {
      rpc_in_flight: { per_agent: RPC_IN_FLIGHT.perAgent, per_node: RPC_IN_FLIGHT.perNode },
      failed_auth_per_ip: { limit: PRE_AUTH_FAILURES.limit, window_seconds: PRE_AUTH_FAILURES.windowSeconds },
      requests_per_agent: {
        limit: PER_AGENT_REQUESTS.limit,
        window_seconds: PER_AGENT_REQUESTS.windowSeconds,
      },
      transfer: {
        per_tx_units: config.transfers.perTxLimitUnits.toString(),
        daily_units: config.transfers.dailyLimitUnits.toString(),
        recipient_allowlist: config.transfers.recipientAllowlist ?? null,
      },
      faucet: {
        payout_units: config.faucet.payoutUnits.toString(),
        cooldown_ms: config.faucet.cooldownMs,
        daily_units: config.faucet.dailyLimitUnits.toString(),
      },
      x402: {
        amount_units: config.x402.amountUnits?.toString() ?? null,
        pay_to: config.x402.payTo ?? null,
        max_timeout_seconds: config.x402.maxTimeoutSeconds,
        daily_limit: config.x402.dailyLimit,
      },
    },
    features: {
      faucet: config.features.faucet,
      transfers: config.features.transfers,
      x402: config.features.x402,
      registration: config.features.publicRegistration,
    },
  };
  // The body is mostly constant and JSON.stringify was the largest cost of the route: serialize
  // the constant parts once and splice in the block and the caller.
  const chainHead = JSON.stringify({
    chain_id: CHAIN_ID,
    caip2: CAIP2_NETWORK,
    native_token: { symbol: NATIVE_SYMBOL, decimals: NATIVE_DECIMALS },
  }).slice(0, -1);
  const head = `{"api_version":${JSON.stringify(API_VERSION)},"chain":${chainHead},"latest_block":`;
  const tail = JSON.stringify(fixed).slice(1);
  return async (c) => {
    const agent = c.get("agent");
    const latest = latestBlock ? await latestBlock.get() : null;
    const caller = JSON.stringify({
      agent_id: agent.agentId,
      assigned_wallet: agent.assignedWallet,
      capabilities: agent.capabilities,
      spending_policy: agent.hasPolicy,
    });
    const block = latest === null ? "null" : `"${latest}"`;
    return c.body(`${head}${block}},"agent":${caller},${tail}`, 200, JSON_CONTENT);
  };
}

const JSON_CONTENT = { "content-type": "application/json" };
