/**
 * How many times an x402 payer has paid, as the chain and the facilitator's table tell it: the
 * AuthorizationUsed events the native-transfer-authorization precompile emitted for the payer, and
 * the x402_settlements rows naming the payer. Tests that prove "paid once" count both.
 */
import { sql } from "drizzle-orm";
import { type Address, parseEventLogs } from "viem";
import { NATIVE_TRANSFER_AUTH_ABI } from "../devnet/index.ts";
import { publicClientFor } from "../devnet/testing.ts";
import { type Db, queryRows } from "../origin/db/client.ts";
import { NATIVE_TRANSFER_AUTH_ADDRESS } from "../shared/constants.ts";

/** AuthorizationUsed logs on chain whose authorizer is `payer`. */
export async function authorizationUsedCount(devnetUrl: string, payer: Address): Promise<number> {
  const logs = await publicClientFor(devnetUrl).getLogs({
    address: NATIVE_TRANSFER_AUTH_ADDRESS,
    fromBlock: 0n,
    toBlock: "latest",
  });
  return parseEventLogs({ abi: NATIVE_TRANSFER_AUTH_ABI, eventName: "AuthorizationUsed", logs }).filter(
    (log) => log.args.authorizer.toLowerCase() === payer.toLowerCase(),
  ).length;
}

/** x402_settlements rows whose payer is `payer`. */
export async function settlementRowCount(db: Db, payer: Address): Promise<number> {
  const [row] = await queryRows<{ n: number }>(
    db,
    sql`select count(*)::int as n from x402_settlements where payer = ${payer.toLowerCase()}`,
  );
  return row!.n;
}
