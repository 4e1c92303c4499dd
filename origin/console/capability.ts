import { type Capability, capability } from "../capability.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { foldStateCounts } from "../metrics/state-counts.ts";
import { sweepEndedSessions } from "../passkeys/sessions.ts";
import { startLoop } from "../workers/loop.ts";
import type { ServiceWallets } from "./charts.ts";
import type { NodeLocal } from "./node-local.ts";
import { createConsoleRouter } from "./router.ts";

/**
 * How often the counts by state take in the changes their tables' triggers appended: a read sums
 * what is not folded yet, so the period bounds what the operations view and a scrape add up.
 */
const STATE_COUNTS_FOLD_PERIOD_MS = 5_000;

/** How often the sessions past their retention are deleted. */
const SESSIONS_RETENTION_PERIOD_MS = 60 * 60_000;

/**
 * The operator console and /metrics: private origin only (the edge never routes them), mounted
 * whatever the gateway switch (router.ts says why). Its workers fold the counts by state both read
 * (metrics/state-counts.ts) and delete console sessions past their retention (passkeys/sessions.ts).
 */
export function createConsoleModule(
  infra: Infrastructure,
  node: NodeLocal,
  wallets?: ServiceWallets,
): Capability {
  return capability("console", {
    routes: [{ path: "/", router: createConsoleRouter(infra, node, wallets) }],
    workers: () => [
      startLoop("state-counts-fold", STATE_COUNTS_FOLD_PERIOD_MS, infra.logger, async () => {
        await foldStateCounts(infra.database.db);
      }),
      startLoop("operator_sessions_retention", SESSIONS_RETENTION_PERIOD_MS, infra.logger, async () => {
        const deleted = await sweepEndedSessions(infra.database.db);
        if (deleted > 0) infra.logger.info({ deleted }, "console sessions past retention deleted");
      }),
    ],
  });
}
