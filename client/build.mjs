#!/usr/bin/env node
/**
 * Builds the client package (`agent-wallet-client`, docs/agents.md "From TypeScript") into dist/,
 * which git ignores: `npm pack` in this folder runs it first (prepack).
 *
 *   dist/index.js   one ES module: the client, the shared modules it uses and the two viem
 *                   functions it calls (a transport and a chain definition), bundled, so the
 *                   package has no runtime dependency and installs without the network. Built for
 *                   the browser platform: fetch and Web Crypto only, which Node 20, Workers and
 *                   browsers all have.
 *   dist/types/     its declarations (tsc). They name viem's types for transport() and chain77():
 *                   viem is an optional peer dependency, the agent's own copy when it has one.
 *
 * Plain JavaScript, so that it runs with node alone.
 */
import { execFileSync } from "node:child_process";
import { readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = path.join(here, "dist");

await rm(dist, { recursive: true, force: true });
await build({
  entryPoints: [path.join(here, "index.ts")],
  outfile: path.join(dist, "index.js"),
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "es2022",
  legalComments: "eof",
  logLevel: "warning",
});
const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
execFileSync(process.execPath, [tsc, "-p", path.join(here, "tsconfig.build.json")], { stdio: "inherit" });
await rewriteSpecifiers(path.join(dist, "types"));

/**
 * The sources import each other as `./x.ts`; a declaration file is found by its `.js` name under
 * every module resolution an agent's project may use, so the specifiers are rewritten to `.js`.
 */
async function rewriteSpecifiers(dir) {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      await rewriteSpecifiers(file);
    } else if (entry.name.endsWith(".d.ts")) {
      const text = await readFile(file, "utf8");
      await writeFile(file, text.replace(/(["'])(\.{1,2}\/[^"']+)\.ts\1/g, "$1$2.js$1"));
    }
  }
}
