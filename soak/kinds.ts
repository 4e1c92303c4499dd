/**
 * The soak's request mix: each kind is one request an agent (or an attacker) makes through the
 * edge, with its weight in the mix. The mix is a list, so a new surface is one more entry here and
 * nothing else changes (a token-only agent's authorize-then-pay: its payers in the context and one
 * entry calling `payDemo`).
 */
import { randomBytes, randomInt } from "node:crypto";
import type { Address } from "viem";
import { HEADER_REGISTRATION } from "../shared/constants.ts";
import type { Answer, EdgeClient } from "./edge-client.ts";
import type { LimitObservations } from "./limits.ts";
import { type PaymentObservations, payDemo, type SoakPayer } from "./x402.ts";

export type SoakAgent = { token: string; agentId: string; wallet: Address };

export type SoakContext = {
  edge: EdgeClient;
  /** Agents with read, faucet and transfer, funded: the ordinary traffic. */
  agents: readonly SoakAgent[];
  /** Wallets issued by public registration during the run (transfer recipients too). */
  registered: Address[];
  limits: LimitObservations;
  /** Funded viem local accounts that pay the x402 demo with the official client. */
  accountPayers: readonly SoakPayer[];
  payments: PaymentObservations;
};

export type SoakKind = {
  /** The route kind the table counts it under. */
  name: string;
  weight: number;
  run(ctx: SoakContext): Promise<Answer>;
};

const pick = <T>(items: readonly T[]): T => items[randomInt(items.length)]!;
const freshKey = (prefix: string): string => `${prefix}-${randomBytes(12).toString("hex")}`;

/** Public addresses (no private, shared or documentation range), as the edge would see clients. */
export const REGISTRATION_IPS = Array.from(
  { length: 40 },
  (_, i) => `81.2.${69 + (i >> 4)}.${16 + (i & 15)}`,
);
/** Two addresses that present bad tokens, so their failures fill the pre-auth window. */
export const BAD_TOKEN_IPS = ["5.9.10.11", "2a01:4f8:10a:1::2"];

const ALLOWED_READS = (ctx: SoakContext): { method: string; params: unknown[] }[] => [
  { method: "eth_blockNumber", params: [] },
  { method: "eth_chainId", params: [] },
  { method: "eth_getBalance", params: [pick(ctx.agents).wallet, "latest"] },
  { method: "eth_getBlockByNumber", params: ["latest", false] },
];

const rpcCall = (ctx: SoakContext, id: number): unknown => ({
  jsonrpc: "2.0",
  id,
  ...pick(ALLOWED_READS(ctx)),
});

export const BASE_MIX: readonly SoakKind[] = [
  {
    name: "network",
    weight: 14,
    run: (ctx) => ctx.edge.request("/agent/v1/network", { token: pick(ctx.agents).token }),
  },
  {
    name: "balance",
    weight: 14,
    run: (ctx) => ctx.edge.request("/agent/v1/balance", { token: pick(ctx.agents).token }),
  },
  {
    name: "rpc",
    weight: 14,
    run: (ctx) => ctx.edge.request("/agent/v1/rpc", { token: pick(ctx.agents).token, json: rpcCall(ctx, 1) }),
  },
  {
    name: "rpc batch",
    weight: 7,
    run: (ctx) => {
      const calls = Array.from({ length: 2 + randomInt(19) }, (_, i) => rpcCall(ctx, i));
      // A disallowed method rides along now and then: a JSON-RPC error inside a 200, never a write.
      if (randomInt(4) === 0)
        calls.push({ jsonrpc: "2.0", id: 99, method: "eth_sendRawTransaction", params: ["0x00"] });
      return ctx.edge.request("/agent/v1/rpc", { token: pick(ctx.agents).token, json: calls });
    },
  },
  {
    name: "transfer",
    weight: 8,
    run: (ctx) => {
      const from = pick(ctx.agents);
      const others = ctx.agents.filter((agent) => agent !== from).map((agent) => agent.wallet);
      const to = ctx.registered.length > 0 && randomInt(4) === 0 ? pick(ctx.registered) : pick(others);
      return ctx.edge.request("/agent/v1/transfers", {
        token: from.token,
        json: { idempotency_key: freshKey("soak-transfer"), to, amount: String(1 + randomInt(1000)) },
      });
    },
  },
  {
    name: "faucet",
    weight: 2,
    run: async (ctx) => {
      const agent = pick(ctx.agents);
      const answer = await ctx.edge.request("/agent/v1/faucet", {
        token: agent.token,
        json: { idempotency_key: freshKey("soak-faucet") },
      });
      const createdAt = (answer.body as { created_at?: string } | undefined)?.created_at;
      ctx.limits.faucet(agent.agentId, answer.status, answer.code, createdAt);
      return answer;
    },
  },
  {
    name: "register",
    weight: 2,
    run: async (ctx) => {
      const ip = pick(REGISTRATION_IPS);
      const answer = await ctx.edge.requestFrom(ip, "/agent/v1/register", {
        json: {},
        headers: { [HEADER_REGISTRATION]: "1" },
      });
      ctx.limits.registration(ip, answer.status);
      const wallet = (answer.body as { assigned_wallet?: Address } | undefined)?.assigned_wallet;
      if (answer.status === 201 && wallet) ctx.registered.push(wallet);
      return answer;
    },
  },
  {
    // Each is a quote (402) and a paid retry settled on chain, counted by the final status.
    name: "x402 pay (account)",
    weight: 3,
    run: (ctx) => payDemo(ctx.edge, pick(ctx.accountPayers), ctx.payments),
  },
  {
    name: "bad token",
    weight: 5,
    run: async (ctx) => {
      const ip = pick(BAD_TOKEN_IPS);
      const token = pick([
        `agt_${randomBytes(16).toString("hex")}_${randomBytes(32).toString("hex")}`,
        // A real agent's token id with a wrong secret: the same 401 (no oracle).
        `${pick(ctx.agents).token.slice(0, 36)}_${randomBytes(32).toString("hex")}`,
        "not-a-token",
      ]);
      const sent = Date.now();
      const answer = await ctx.edge.requestFrom(ip, "/agent/v1/balance", { token });
      ctx.limits.badToken(ip, answer.status, { sent, answered: Date.now() });
      return answer;
    },
  },
];

/** Picks a kind with probability proportional to its weight. */
export function pickKind(mix: readonly SoakKind[]): SoakKind {
  const total = mix.reduce((sum, kind) => sum + kind.weight, 0);
  let roll = Math.random() * total;
  for (const kind of mix) {
    roll -= kind.weight;
    if (roll < 0) return kind;
  }
  return mix[mix.length - 1]!;
}
