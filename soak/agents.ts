/**
 * The soak's agents, made as the local stack makes its own: operator-provisioned on keys the
 * origin's refill worker generated (during the stack's start, so the stack's restore drill covers
 * their batches and proves their identities, and the funding gate opens honestly), then funded
 * from the operator pool by ordinary transfers.
 */
import type { Address } from "viem";
import { provisionWhenKeyFree } from "../dev/local-agent.ts";
import { payFromOperatorPool } from "../dev/operator-pool.ts";
import type { Db } from "../origin/db/client.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import type { SoakAgent } from "./kinds.ts";

export type SoakAgents = {
  /** The ordinary traffic's agents. */
  regular: SoakAgent[];
  /** Sends requests past the per-agent limit, and nothing else. */
  burst: SoakAgent;
  /** Transfers until its daily limit refuses, and nothing else. */
  dailyLimit: SoakAgent;
};

/** Each ordinary agent's starting money: far more than a run's transfers and fees. */
export const REGULAR_UNITS = 50_000_000n;
/** The daily-limit agent's: more than its daily limit, so the limit and not the balance refuses. */
export const DAILY_LIMIT_AGENT_UNITS = 150_000_000n;

/** `count` ordinary agents and the two probes' agents, provisioned on free verified keys. */
export async function provisionSoakAgents(db: Db, count: number): Promise<SoakAgents> {
  const made: SoakAgent[] = [];
  for (let i = 0; i < count + 2; i++) {
    const agent = await provisionWhenKeyFree(db, ["read", "faucet", "transfer"]);
    if (!agent) throw new Error("no verified key became free for the soak's agents within a minute");
    made.push({ ...agent, wallet: agent.wallet as Address });
  }
  const [burst, dailyLimit, ...regular] = made as [SoakAgent, SoakAgent, ...SoakAgent[]];
  return { regular, burst, dailyLimit };
}

/** Funds the agents that spend (the burst agent only reads). */
export async function fundSoakAgents(devnetUrl: string, agents: SoakAgents): Promise<void> {
  for (const agent of agents.regular) {
    await payFromOperatorPool(devnetUrl, agent.wallet, REGULAR_UNITS * WEI_PER_UNIT);
  }
  await payFromOperatorPool(devnetUrl, agents.dailyLimit.wallet, DAILY_LIMIT_AGENT_UNITS * WEI_PER_UNIT);
}
