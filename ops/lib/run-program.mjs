#!/usr/bin/env node
/**
 * Runs one of the repository's programs for its npm script (`npm run policy -- …`): its bundle
 * while it is current (program-bundles.mjs), else its TypeScript through tsx, in this process
 * either way. Through the `tsx` command an operator tool started two processes and compiled its
 * sources each time, about 2 s of CPU before its first line; from its bundle it starts in a few
 * tenths of a second. `npm start` and a test run keep the bundles current; a program changed since
 * runs from its sources, so a tool never runs stale code.
 *
 *   node ops/lib/run-program.mjs ops/policy.ts [the program's arguments…]
 *
 * Plain JavaScript, so that it runs with node alone.
 */
import path from "node:path";
import { importProgram, PROGRAMS, REPO_ROOT } from "./program-bundles.mjs";

const [entry] = process.argv.splice(2, 1);
if (!entry || !PROGRAMS.includes(entry)) {
  process.stderr.write(
    `usage: node ops/lib/run-program.mjs PROGRAM [ARGS…], PROGRAM one of ${PROGRAMS.join(", ")}\n`,
  );
  process.exit(64);
}
// The program reads its arguments from process.argv.slice(2), as when it is started on its own.
process.argv[1] = path.resolve(REPO_ROOT, entry);
await importProgram(entry);
