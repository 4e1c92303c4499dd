import { existsSync } from "node:fs";
import path from "node:path";
import { eq } from "drizzle-orm";
import type { Address } from "viem";
import { publicClientFor } from "../devnet/testing.ts";
import { findIdentityByTokenId } from "../origin/auth/identity-repository.ts";
import type { Db } from "../origin/db/client.ts";
import { agentIdentities } from "../origin/db/schema.ts";
import { provisionIdentity } from "../origin/keypool/provision.ts";
import { parseBearerHeader } from "../shared/agent-token.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import { sleep } from "../shared/sleep.ts";
import { readLocalJson, writeLocalJson } from "./local-files.ts";
import { payFromOperatorPool } from "./operator-pool.ts";

export type LocalAgent = {
  token: string;
  agentId: string;
  wallet: string;
  /**
   * The agent the folder had saved, when this start had to make a new one in its place, and why:
   * `npm start` says so, rather than print another wallet without a word.
   */
  replaced?: ReplacedAgent;
};

export type ReplacedAgent = { agentId: string; wallet: string; why: string };

/** local-agent.json: the agent, and whether its starting money has reached its wallet. */
type SavedAgent = Omit<LocalAgent, "replaced"> & { funded?: boolean };

/** Test money for the local agent's wallet on first creation: 100 USDC. */
const STARTING_UNITS = 100_000_000n;

/**
 * The local stack's operator-provisioned agent: created once (when the refill worker has made a
 * verified key), funded on the devnet, and kept in a 0600 file so each start prints the same one.
 * The file says `funded` only once the funding transfer is mined: a start stopped or failed in
 * between (a Ctrl-C, a devnet that went away) leaves it unsaid, and the next start funds the same
 * agent then, up to the starting money (a transfer that was mined after all is not sent twice).
 * Returns undefined if no key became free within the wait.
 */
export async function loadOrCreateLocalAgent(params: {
  db: Db;
  dataDir: string;
  devnetUrl: string;
  waitMs?: number;
}): Promise<LocalAgent | undefined> {
  const file = path.join(params.dataDir, "local-agent.json");
  let agent: SavedAgent | undefined;
  let replaced: ReplacedAgent | undefined;
  if (existsSync(file)) {
    const saved = await readLocalJson<SavedAgent>(
      file,
      "delete it, and the next start provisions and funds a new local agent",
    );
    const parsed = parseBearerHeader(`Bearer ${saved.token}`);
    const identity = parsed ? await findIdentityByTokenId(params.db, parsed.tokenId) : undefined;
    if (identity?.enabled && !identity.revoked) agent = saved;
    else
      replaced = { agentId: saved.agentId, wallet: saved.wallet, why: await whyReplaced(params.db, saved) };
  }
  if (!agent) {
    const made = await provisionWhenKeyFree(params.db, ["read", "faucet", "transfer"], params.waitMs);
    if (!made) return undefined;
    agent = made;
    await writeLocalJson(file, agent);
  }
  const { token, agentId, wallet } = agent;
  if (!agent.funded) {
    // A real transfer from the operator pool, not dev_setBalance: the devnet's money stays conserved.
    const startingWei = STARTING_UNITS * WEI_PER_UNIT;
    const balance = await publicClientFor(params.devnetUrl).getBalance({ address: wallet as Address });
    if (balance < startingWei)
      await payFromOperatorPool(params.devnetUrl, wallet as Address, startingWei - balance);
    await writeLocalJson(file, { token, agentId, wallet, funded: true });
  }
  return { token, agentId, wallet, ...(replaced ? { replaced } : {}) };
}

/**
 * Why the saved agent's token no longer serves. A rotated token is the README's own advice for a
 * leaked one: the service keeps only its hash, so no start can print it, and the agent keeps its
 * wallet under the token its rotation printed.
 */
async function whyReplaced(db: Db, saved: SavedAgent): Promise<string> {
  const [identity] = await db
    .select({ enabled: agentIdentities.enabled, revoked: agentIdentities.revoked })
    .from(agentIdentities)
    .where(eq(agentIdentities.agentId, saved.agentId));
  if (!identity) return "is not in this database";
  if (identity.revoked) return "is revoked";
  if (!identity.enabled) return "is disabled";
  return "has had its token rotated since (it keeps its wallet, with the token the rotation printed)";
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
