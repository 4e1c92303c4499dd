import type { Address } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { publicClientFor } from "../../devnet/testing.ts";
import { nodeChartsSchema } from "../../shared/console-charts-schema.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import { consoleCalls, consoleSecrets } from "../../testing/console-client.ts";
import { type MoneyStack, startMoneyStack } from "../../testing/money-stack.ts";

// The charts' service wallets on the whole money stack (origin, enclave, devnet, Postgres): the
// treasury's and the settler's addresses are those the enclave sealed, their balances those the
// devnet holds, each against the floor the configuration sets.

const secrets = consoleSecrets();
/** Far above what the stack funds the treasury with: the chart must say it is below. */
const TREASURY_FLOOR = "1000000000000000";

describe("the charts' service wallet balances (real stack)", () => {
  let stack: MoneyStack;

  beforeAll(async () => {
    stack = await startMoneyStack({
      env: { ...secrets.env, AGENT_TREASURY_FLOOR: TREASURY_FLOOR },
      x402: { amountUnits: 1_000n, payTo: "enclave-payee" },
    });
  });
  afterAll(async () => {
    await stack?.close();
  });

  it("reads the sealed treasury and settler from the chain, in units, against their floors", async () => {
    const chain = publicClientFor(stack.devnet.url);
    const units = async (address: Address): Promise<string> =>
      ((await chain.getBalance({ address })) / WEI_PER_UNIT).toString();
    const response = await consoleCalls(stack.origin.base, { admin: secrets.adminToken }).get(
      "/overview/charts",
    );
    expect(response.status).toBe(200);
    const { balances } = nodeChartsSchema.parse(response.body);
    expect(balances).toEqual([
      {
        wallet: "treasury",
        address: stack.treasury.toLowerCase(),
        balance_units: await units(stack.treasury),
        floor_units: TREASURY_FLOOR,
        below_floor: true,
        unknown_reason: null,
      },
      {
        wallet: "settler",
        address: stack.settler!.toLowerCase(),
        balance_units: await units(stack.settler!),
        floor_units: "1000000",
        below_floor: false,
        unknown_reason: null,
      },
    ]);
    expect(BigInt(balances[1]!.balance_units!)).toBeGreaterThan(0n);
  });
});
