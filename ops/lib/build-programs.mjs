#!/usr/bin/env node
/**
 * `npm run build`: bundles every program (ops/lib/program-bundles.mjs) when one of them changed
 * since the last build, so that a node's services, started through run-program.mjs, run from their
 * bundles (docs/operations.md, "Service units"). Exits 0 with a line either way, 1 if the build
 * failed. Plain JavaScript, so that it runs with node alone.
 */
import { buildStaleProgramsSaying, PROGRAMS } from "./program-bundles.mjs";

try {
  const stale = await buildStaleProgramsSaying((line) => process.stdout.write(`[build] ${line}\n`));
  if (stale.length === 0)
    process.stdout.write(`[build] all ${PROGRAMS.length} programs' bundles are current\n`);
} catch (error) {
  process.stderr.write(`[build] could not bundle the programs: ${error?.message ?? error}\n`);
  process.exit(1);
}
