import type { Handler } from "hono";
import type { NodeCharts } from "../../shared/console-charts-schema.ts";
import { WEI_PER_UNIT } from "../../shared/constants.ts";
import type { ChainClient } from "../chain/client.ts";
import type { AppEnv } from "../http/env.ts";
import type { Infrastructure } from "../infrastructure.ts";
import {
  hourWindow,
  minuteWindow,
  readActionsByMinute,
  readFindingsByClass,
  readKeyStock,
  readRegistrationsByHour,
  readTimeToConfirmation,
} from "./charts-queries.ts";
import type { NodeLocal } from "./node-local.ts";

/** The service's own wallets, from the sealed policy the start-up check matched (compose.ts). */
export type ServiceWallets = { treasury: string | undefined; settler: string | undefined };

const iso = (value: Date): string => value.toISOString();

/**
 * GET {base}/admin/agents/overview/charts (docs/operations.md#the-node-in-charts): the last hour
 * and day of the node in fixed UTC buckets, read from the database, this process's own counters
 * and the chain. Read only.
 */
export function chartsHandler(
  deps: Infrastructure,
  node: NodeLocal,
  wallets: ServiceWallets,
): Handler<AppEnv> {
  const db = deps.database.db;
  return async (c) => {
    const now = deps.clock.now();
    const minutes = minuteWindow(now);
    const hours = hourWindow(now);
    const [registrations, actions, confirmation, findings, keyStock, balances] = await Promise.all([
      readRegistrationsByHour(db, hours),
      readActionsByMinute(db, minutes),
      readTimeToConfirmation(db, minutes),
      readFindingsByClass(db, hours),
      readKeyStock(db),
      readBalances(deps.chain, wallets, deps.config.floors),
    ]);
    const refusals = node.metrics.registrationRefusalsByHour(now);
    const body: NodeCharts = {
      generated_at: iso(now),
      registrations: {
        from: iso(hours.from),
        to: iso(hours.to),
        buckets: refusals.map(({ start, counts }) => ({
          start: iso(start),
          issued: registrations.get(iso(start))?.issued ?? 0,
          admitted_attempts: registrations.get(iso(start))?.attempts ?? 0,
          refused: counts,
        })),
        refusals_since: iso(node.startedAt),
      },
      actions: { from: iso(minutes.from), to: iso(minutes.to), buckets: actions },
      time_to_confirmation: { from: iso(minutes.from), to: iso(minutes.to), ...confirmation },
      key_stock: keyStock,
      findings: { from: iso(hours.from), to: iso(hours.to), by_class: findings },
      balances,
    };
    return c.json(body);
  };
}

/** Each service wallet's balance now, in whole units (wei rounded down), against its floor. */
async function readBalances(
  chain: ChainClient | undefined,
  wallets: ServiceWallets,
  floors: { treasuryUnits: bigint; settlerUnits: bigint },
): Promise<NodeCharts["balances"]> {
  const read = async (
    wallet: "treasury" | "settler",
    address: string | undefined,
    floor: bigint,
  ): Promise<NodeCharts["balances"][number]> => {
    const unknown = (reason: "not_configured" | "no_chain" | "chain_unavailable") => ({
      wallet,
      address: address ?? null,
      balance_units: null,
      floor_units: floor.toString(),
      below_floor: null,
      unknown_reason: reason,
    });
    if (!address) return unknown("not_configured");
    if (!chain) return unknown("no_chain");
    try {
      const units = (await chain.getBalance({ address: address as `0x${string}` })) / WEI_PER_UNIT;
      return {
        wallet,
        address,
        balance_units: units.toString(),
        floor_units: floor.toString(),
        below_floor: units < floor,
        unknown_reason: null,
      };
    } catch {
      // A chart of the node must draw whatever the chain does: it says the balance is unknown.
      return unknown("chain_unavailable");
    }
  };
  return Promise.all([
    read("treasury", wallets.treasury, floors.treasuryUnits),
    read("settler", wallets.settler, floors.settlerUnits),
  ]);
}
