#!/usr/bin/env node
// The `agent-wallet` bin. It runs the CLI bundled into one ES module (cli/build.mjs, at install),
// which starts in a fraction of the time tsx takes to compile the TypeScript and Node to load all
// of viem (docs/performance.md, "The agent CLI's start"). When the bundle is missing, or older than
// a file it was built from (an edited checkout), it runs the TypeScript through tsx as before.
import { readFileSync, statSync } from "node:fs";

const bundle = new URL("./dist/agent-wallet.mjs", import.meta.url);

/** The bundle exists and none of the repository's files it was built from changed since. */
function bundleIsCurrent() {
  try {
    const builtAt = statSync(bundle).mtimeMs;
    const inputs = JSON.parse(readFileSync(new URL("./dist/inputs.json", import.meta.url), "utf8"));
    const root = new URL("../", import.meta.url);
    return inputs.every((input) => statSync(new URL(input, root)).mtimeMs <= builtAt);
  } catch {
    return false;
  }
}

if (bundleIsCurrent()) {
  await import(bundle.href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("./main.ts");
}
