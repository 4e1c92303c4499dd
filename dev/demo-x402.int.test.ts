import type { Address } from "viem";
import { describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../devnet/testing.ts";
import { WEI_PER_UNIT } from "../shared/constants.ts";
import { runTool, type ToolRun } from "../testing/run-tool.ts";
import { useMoneyStack } from "../testing/stack.ts";
import { authorizationUsedCount } from "../testing/x402-settlements.ts";

// `npm run demo:x402` as an operator runs it: the script in its own process, told where the stack
// is and which token to use by AGENT_BASE_URL and AGENT_TOKEN only, against a stack on ports of
// its own (not the local stack's 8787).

const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

function demo(args: string[], env: Record<string, string>): Promise<ToolRun> {
  return runTool("dev/demo-x402.ts", args, { env, cleanEnv: true, timeoutMs: 90_000 });
}

describe("npm run demo:x402 (real stack, x402 on)", () => {
  const stack = useMoneyStack({ x402: { amountUnits: AMOUNT, payTo } }, { timeoutMs: 120_000 });

  it("pays the stack named by AGENT_BASE_URL with the token in AGENT_TOKEN", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const chain = publicClientFor(stack.devnet.url);
    const before = await chain.getBalance({ address: agent.wallet });
    const paid = await demo([], { AGENT_TOKEN: agent.token, AGENT_BASE_URL: stack.origin.base });
    expect(paid.code, paid.stderr).toBe(0);
    expect(paid.stdout).toContain(`demo:x402 against ${stack.origin.base}`);
    expect(paid.stdout).toMatch(/receipt status 0x1/);
    expect(before - (await chain.getBalance({ address: agent.wallet }))).toBe(AMOUNT * WEI_PER_UNIT);
    expect(await authorizationUsedCount(stack.devnet.url, agent.wallet)).toBe(1);
    expect(await chain.getBalance({ address: payTo })).toBe(AMOUNT * WEI_PER_UNIT);
    expect(paid.stdout + paid.stderr).not.toContain(agent.token);
  });

  it("refuses a token given as an argument, and a missing AGENT_TOKEN or AGENT_BASE_URL, paying nothing (exit 2)", async () => {
    const agent = await stack.newAgent({ units: 1_000_000n });
    const asArgument = await demo([agent.token], { AGENT_BASE_URL: stack.origin.base });
    expect(asArgument.code).toBe(2);
    expect(asArgument.stderr).toMatch(/give the token in AGENT_TOKEN/);
    expect(asArgument.stdout + asArgument.stderr).not.toContain(agent.token);
    // An argument is refused even beside the environment: it may be a token all the same.
    const beside = await demo([agent.token], { AGENT_TOKEN: agent.token, AGENT_BASE_URL: stack.origin.base });
    expect(beside.code).toBe(2);
    const noBase = await demo([], { AGENT_TOKEN: agent.token });
    expect(noBase.code).toBe(2);
    expect(noBase.stderr).toMatch(/set AGENT_BASE_URL/);
    const noToken = await demo([], { AGENT_BASE_URL: stack.origin.base });
    expect(noToken.code).toBe(2);
    expect(noToken.stderr).toMatch(/set AGENT_TOKEN/);
    expect(await authorizationUsedCount(stack.devnet.url, agent.wallet)).toBe(0);
  });
});
