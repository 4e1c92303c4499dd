import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { publicClientFor } from "../devnet/testing.ts";
import { rotateToken } from "../origin/auth/rotate-token.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import { useMoneyStack } from "../testing/stack.ts";
import { loadOrCreateLocalAgent } from "./local-agent.ts";

// `npm start` prints the local agent's token "whose wallet holds 100 test USDC" (README). The agent
// was saved to local-agent.json before its funding transfer was sent, and a saved agent was never
// funded again: a start that stopped in between (a Ctrl-C, the devnet gone) left every later start
// printing a token whose wallet held nothing.

describe("the local stack's agent (real database, enclave-made keys and devnet)", () => {
  const stack = useMoneyStack();
  const folders: string[] = [];
  afterAll(async () => {
    for (const folder of folders) await rm(folder, { recursive: true, force: true });
  });
  const dataFolder = async (): Promise<string> => {
    const made = await mkdtemp(path.join(tmpdir(), "local-agent-"));
    folders.push(made);
    return made;
  };
  const balanceOf = (wallet: string) =>
    publicClientFor(stack.devnet.url).getBalance({ address: wallet as `0x${string}` });

  it("is funded by the next start when the start that made it stopped before funding it, once", async () => {
    await stack.addFreeKeys(1);
    const dataDir = await dataFolder();
    // The devnet is not there when the first start funds the agent it has just saved.
    await expect(
      loadOrCreateLocalAgent({
        db: stack.db.handle.db,
        dataDir,
        devnetUrl: "http://127.0.0.1:9",
        waitMs: 5_000,
      }),
    ).rejects.toThrow();
    const saved = JSON.parse(await readFile(path.join(dataDir, "local-agent.json"), "utf8")) as {
      wallet: string;
    };
    expect(await balanceOf(saved.wallet)).toBe(0n);

    const next = await loadOrCreateLocalAgent({
      db: stack.db.handle.db,
      dataDir,
      devnetUrl: stack.devnet.url,
    });
    // The same agent, now holding its starting money.
    expect(next?.wallet).toBe(saved.wallet);
    expect(await balanceOf(saved.wallet)).toBe(100_000_000n * WEI_PER_UNIT);
    // And not twice: a later start leaves the wallet as it is.
    const again = await loadOrCreateLocalAgent({
      db: stack.db.handle.db,
      dataDir,
      devnetUrl: stack.devnet.url,
    });
    expect(again).toEqual(next);
    expect(await balanceOf(saved.wallet)).toBe(100_000_000n * WEI_PER_UNIT);
  });

  // README: `agent-wallet rotate-token` keeps the wallet and prints the new token once; the next
  // start, unable to print a token it never saw, made a new agent and printed it without a word.
  it("names the saved agent whose token was rotated when the next start makes a new one", async () => {
    await stack.addFreeKeys(2);
    const dataDir = await dataFolder();
    const params = { db: stack.db.handle.db, dataDir, devnetUrl: stack.devnet.url };
    const first = await loadOrCreateLocalAgent(params);
    expect(first?.replaced).toBeUndefined();
    const rotated = await rotateToken(stack.db.handle.db, { agentId: first!.agentId });
    expect(rotated.ok).toBe(true);

    const next = await loadOrCreateLocalAgent(params);
    expect(next?.agentId).not.toBe(first!.agentId);
    expect(next?.replaced).toEqual({
      agentId: first!.agentId,
      wallet: first!.wallet,
      why: "has had its token rotated since (it keeps its wallet, with the token the rotation printed)",
    });
    // Said once: the start after that prints the new agent as its own.
    expect((await loadOrCreateLocalAgent(params))?.replaced).toBeUndefined();
  });
});
