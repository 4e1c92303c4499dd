#!/usr/bin/env node
/**
 * Bundles the agent CLI into one ES module, cli/dist/agent-wallet.mjs (git ignores dist/), which
 * the `agent-wallet` bin runs with node alone: tsx compiling the TypeScript at every start, and
 * Node loading the whole of viem, took two to three seconds a command (docs/performance.md,
 * "The agent CLI's start"). Run by `npm install` (prepare) and by the test suite's setup.
 *
 * Beside the bundle, dist/inputs.json lists the repository's files it was built from: the bin
 * runs the TypeScript through tsx instead when one of them is newer than the bundle (an edited
 * checkout), so it never runs stale code. Written to temporary names and renamed into place, so a
 * CLI starting during a rebuild reads the old bundle or the new one, never half of one.
 *
 * Plain JavaScript, so that it runs with node alone.
 */
import { mkdir, rename, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.dirname(here);
const dist = path.join(here, "dist");
const suffix = `.${process.pid}.tmp`;

await mkdir(dist, { recursive: true });
const result = await build({
  entryPoints: [path.join(here, "main.ts")],
  outfile: path.join(dist, `agent-wallet.mjs${suffix}`),
  bundle: true,
  format: "esm",
  platform: "node",
  target: "node20",
  metafile: true,
  legalComments: "eof",
  logLevel: "warning",
  absWorkingDir: root,
});
const inputs = Object.keys(result.metafile.inputs).filter((input) => !input.includes("node_modules/"));
await writeFile(path.join(dist, `inputs.json${suffix}`), `${JSON.stringify(inputs, null, 1)}\n`);
// The bundle last: the bin compares the bundle's time with its inputs' times.
await rename(path.join(dist, `inputs.json${suffix}`), path.join(dist, "inputs.json"));
await rename(path.join(dist, `agent-wallet.mjs${suffix}`), path.join(dist, "agent-wallet.mjs"));
