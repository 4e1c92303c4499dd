#!/usr/bin/env node
/**
 * `npm start`: bundles the programs when one of them changed since the last build
 * (ops/lib/program-bundles.mjs), then runs the launcher, dev/start.ts, from its bundle; the
 * launcher starts the devnet, the enclave and the origin from theirs. Plain JavaScript, so that it
 * runs with node alone.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { buildStaleProgramsSaying, importProgram, REPO_ROOT } from "../ops/lib/program-bundles.mjs";

// A checkout whose packages were never installed (`npm start` before `npm ci`) ended with
// "could not bundle the programs: Cannot find package 'esbuild'", or a stack trace for tsx,
// which does not say what to run. These two are the packages this file loads itself.
const missing = ["esbuild", "tsx"].filter(
  (name) => !existsSync(path.join(REPO_ROOT, "node_modules", name, "package.json")),
);
if (missing.length > 0) {
  process.stderr.write(
    `[start] the packages are not installed in ${REPO_ROOT} (node_modules has no ${missing.join(" or ")}): run npm ci there first, then npm start\n`,
  );
  process.exit(1);
}

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
