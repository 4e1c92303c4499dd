/**
 * The soak's agents, made as the local stack makes its own: operator-provisioned on keys the
 * origin's refill worker generated, their batches drilled and identities proven (so the funding
 * gate opens honestly), and funded from the operator pool by ordinary transfers.
 */
import type { Address } from "viem";
import type { Db } from "../../origin/db/client.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import { provisionWhenKeyFree } from "../lib/local-agent.ts";
import type { LocalAuthority } from "../lib/local-enclave.ts";
import { drillAndProveLocally } from "../lib/local-money.ts";
import { payFromOperatorPool } from "../lib/operator-pool.ts";
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

export async function makeSoakAgents(params: {
  db: Db;
  devnetUrl: string;
  socketPath: string;
  authority: LocalAuthority;
  envId: string;
  count: number;
  onLine: (line: string) => void;
}): Promise<SoakAgents> {
  const made: SoakAgent[] = [];
  for (let i = 0; i < params.count + 2; i++) {
    const agent = await provisionWhenKeyFree(params.db, ["read", "faucet", "transfer"]);
    if (!agent) throw new Error("no verified key became free for the soak's agents within a minute");
    made.push({ ...agent, wallet: agent.wallet as Address });
  }
  await drillAndProveLocally({
    db: params.db,
    socketPath: params.socketPath,
    recoveryKeyFile: params.authority.recoveryKeyFile,
    recoveryEncKeyFile: params.authority.recoveryEncKeyFile,
    envId: params.envId,
    onLine: params.onLine,
  });
  const [burst, dailyLimit, ...regular] = made as [SoakAgent, SoakAgent, ...SoakAgent[]];
  for (const agent of regular) {
    await payFromOperatorPool(params.devnetUrl, agent.wallet, REGULAR_UNITS * WEI_PER_UNIT);
  }
  await payFromOperatorPool(params.devnetUrl, dailyLimit.wallet, DAILY_LIMIT_AGENT_UNITS * WEI_PER_UNIT);
  return { regular, burst, dailyLimit };
}
