#!/usr/bin/env node
/**
 * `npm start`: bundles the programs when one of them changed since the last build
 * (ops/lib/program-bundles.mjs), then runs the launcher, dev/start.ts, from its bundle; the
 * launcher starts the devnet, the enclave and the origin from theirs. Plain JavaScript, so that it
 * runs with node alone.
 */
import { buildStaleProgramsSaying, importProgram } from "../ops/lib/program-bundles.mjs";

// With arguments the launcher only answers them (`--help`, or a usage error): nothing to bundle.
if (process.argv.length <= 2) {
  try {
    await buildStaleProgramsSaying((line) => process.stdout.write(`[start] ${line}\n`));
  } catch (error) {
    process.stderr.write(`[start] could not bundle the programs: ${error?.message ?? error}\n`);
    process.exit(1);
  }
}
// The launcher from its bundle; if a source changed again while the programs were bundled, its
// TypeScript through tsx.
await importProgram("dev/start.ts");
