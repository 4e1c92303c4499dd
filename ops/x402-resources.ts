/**
 * `npm run x402-resources -- <command>`: the resources the facilitator's discovery lists
 * (docs/operations.md#the-x402-discovery-catalogue). Uses the node's configuration (DATABASE_URL,
 * or the embedded cluster of the running stack).
 *
 *   add --url URL [--description TEXT] [--mime-type TYPE] [--json]   registers (or updates) one
 *   list [--json]                                                    the catalogue, oldest first
 *   remove --url URL                                                 takes one out of it
 *
 * The demo is listed by discovery while x402 is on and is no row here; resources of settled
 * payments are rows (source `settled`) that `remove` takes out like the operator's own.
 *
 * Exit codes: docs/operations.md#exit-codes-of-the-operator-tools.
 */
import { parseArgs } from "node:util";
import { openDatabase } from "../origin/db/open.ts";
import {
  addResource,
  type CatalogueRow,
  listResources,
  removeResource,
} from "../origin/x402/payee/catalogue.ts";
import { type CliContext, type CliOutcome, DONE, refused, runCli } from "./lib/cli-shell.ts";
import { nodeConfig } from "./lib/node-config.ts";
import { parseX402ResourcesCommand } from "./lib/x402-resources-args.ts";

const USAGE = `usage: npm run x402-resources -- add --url URL [--description TEXT] [--mime-type TYPE] [--json]
       npm run x402-resources -- list [--json]
       npm run x402-resources -- remove --url URL`;

async function run(argv: string[], { env }: CliContext): Promise<CliOutcome> {
  const [command, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: {
      url: { type: "string" },
      description: { type: "string" },
      "mime-type": { type: "string" },
      json: { type: "boolean" },
    },
    strict: true,
  });
  const parsed = parseX402ResourcesCommand(command, values);
  const config = nodeConfig(env);
  const database = await openDatabase(config, 2);
  try {
    const { db } = database;
    switch (parsed.command) {
      case "add": {
        const added = await addResource(db, parsed.entry);
        if (!added.ok) {
          return refused(
            `the catalogue holds ${added.error.max} registered resources already: remove one first`,
          );
        }
        if (parsed.json) process.stdout.write(`${JSON.stringify(shown(added.value))}\n`);
        else process.stdout.write(`x402-resources: ${added.value.url} listed\n`);
        return DONE;
      }
      case "list": {
        const rows = (await listResources(db)).map(shown);
        if (parsed.json) process.stdout.write(`${JSON.stringify(rows)}\n`);
        else if (rows.length === 0) {
          // Nothing printed would read as a tool that did nothing; the demo is no row, yet listed
          // (docs/operations.md#the-x402-discovery-catalogue).
          process.stdout.write(
            "x402-resources: no resources in the catalogue (discovery still lists the demo while x402 is on)\n",
          );
        } else {
          for (const row of rows) {
            const about = [row.mime_type, row.description].filter(Boolean).join("  ");
            process.stdout.write(`${row.source.padEnd(8)} ${row.url}${about ? `  ${about}` : ""}\n`);
          }
        }
        return DONE;
      }
      case "remove": {
        if (!(await removeResource(db, parsed.url))) return refused(`${parsed.url} is not in the catalogue`);
        process.stdout.write(`x402-resources: ${parsed.url} removed\n`);
        return DONE;
      }
    }
  } finally {
    await database.close();
  }
}

function shown(row: CatalogueRow) {
  return {
    url: row.url,
    source: row.source,
    description: row.description,
    mime_type: row.mimeType,
    created_at: row.createdAt,
    updated_at: row.updatedAt,
  };
}

runCli({ name: "x402-resources", usage: USAGE, run });
