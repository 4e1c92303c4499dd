/**
 * `npm run migrate`: applies the migrations to DATABASE_URL, or to the embedded Postgres under
 * .data/pg when DATABASE_URL is unset (joining the running stack's cluster, or starting it).
 * Exit codes: docs/operations.md#exit-codes-of-the-operator-tools.
 */
import { parseArgs } from "node:util";
import { migrateDatabase } from "../origin/db/migrate.ts";
import { openDatabase } from "../origin/db/open.ts";
import { type CliContext, type CliOutcome, DONE, runCli } from "./lib/cli-shell.ts";
import { nodeConfig } from "./lib/node-config.ts";

async function run(argv: string[], { env }: CliContext): Promise<CliOutcome> {
  parseArgs({ args: argv, options: {}, strict: true });
  const database = await openDatabase(nodeConfig(env), 1);
  try {
    const { applied, restoredEvents } = await database.unbounded((db) => migrateDatabase(db));
    process.stdout.write(
      applied.length === 0 ? "migrate: up to date\n" : `migrate: applied ${applied.length} migration(s)\n`,
    );
    if (restoredEvents > 0) {
      process.stdout.write(
        `migrate: the event log came from another cluster; moved the transaction ids of its ${restoredEvents} event(s) below this cluster's\n`,
      );
    }
    return DONE;
  } finally {
    await database.close();
  }
}

runCli({ name: "migrate", usage: "usage: npm run migrate (with the node's environment)", run });
