import { existsSync } from "node:fs";
import path from "node:path";
import type { Address } from "viem";
import { findIdentityByTokenId } from "../origin/auth/identity-repository.ts";
import type { Db } from "../origin/db/client.ts";
import { provisionIdentity } from "../origin/keypool/provision.ts";
import { parseBearerHeader } from "../shared/agent-token.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import { sleep } from "../shared/sleep.ts";
import { readLocalJson, writeLocalJson } from "./local-files.ts";
import { payFromOperatorPool } from "./operator-pool.ts";

export type LocalAgent = { token: string; agentId: string; wallet: string };

/** Test money for the local agent's wallet on first creation: 100 USDC. */
const STARTING_UNITS = 100_000_000n;

/**
 * The local stack's operator-provisioned agent: created once (when the refill worker has made a
 * verified key), funded on the devnet, and kept in a 0600 file so each start prints the same one.
 * Returns undefined if no key became free within the wait.
 */
export async function loadOrCreateLocalAgent(params: {
  db: Db;
  dataDir: string;
  devnetUrl: string;
  waitMs?: number;
}): Promise<LocalAgent | undefined> {
  const file = path.join(params.dataDir, "local-agent.json");
  if (existsSync(file)) {
    const saved = await readLocalJson<LocalAgent>(
      file,
      "delete it, and the next start provisions and funds a new local agent",
    );
    const parsed = parseBearerHeader(`Bearer ${saved.token}`);
    const identity = parsed ? await findIdentityByTokenId(params.db, parsed.tokenId) : undefined;
    if (identity?.enabled && !identity.revoked) return saved;
  }
  const agent = await provisionWhenKeyFree(params.db, ["read", "faucet", "transfer"], params.waitMs);
  if (!agent) return undefined;
  await writeLocalJson(file, agent);
  // A real transfer from the operator pool, not dev_setBalance: the devnet's money stays conserved.
  await payFromOperatorPool(params.devnetUrl, agent.wallet as Address, STARTING_UNITS * WEI_PER_UNIT);
  return agent;
}

/**
 * An operator-provisioned identity, as soon as the refill worker has a verified key free (retried
 * every half second); undefined if none became free within `waitMs` (default a minute).
 */
export async function provisionWhenKeyFree(
  db: Db,
  capabilities: string[],
  waitMs = 60_000,
): Promise<LocalAgent | undefined> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const result = await provisionIdentity(db, { capabilities, origin: "operator" });
    if (result.ok) {
      return {
        token: result.value.token,
        agentId: result.value.agentId,
        wallet: result.value.assignedWallet,
      };
    }
    if (result.error.code === "validation_failed" || Date.now() > deadline) return undefined;
    await sleep(500);
  }
}
