/**
 * The one entry of every operator tool in ops/: a tool parses its own arguments and returns what
 * it came to; the shell turns that, or what the tool threw, into one exit code and at most one
 * line of its own on stderr (docs/operations.md#exit-codes-of-the-operator-tools).
 */
import { readFile } from "node:fs/promises";
import { inspect } from "node:util";
import { stopOwnedClusters } from "../../origin/db/owned-clusters.ts";
import { asksForHelp } from "../../shared/no-arguments.ts";

/** docs/operations.md#exit-codes-of-the-operator-tools */
export const EXIT_CODES = { done: 0, refused: 1, usage: 2, error: 3, interrupted: 130 } as const;

export type ExitKind = keyof typeof EXIT_CODES;

/** Set to 1 to have an error's stack and causes printed (still without secrets). */
export const DEBUG_ENV = "OPS_DEBUG";

/** A command line the tool cannot run: the message and the tool's usage on stderr, exit 2. */
export class UsageError extends Error {
  override readonly name: string = "UsageError";
}

/**
 * What a tool's run came to. `refused`: a decision the tool reports as failure (not found, refused
 * by the enclave, a batch that did not restore). `error`: an infrastructure failure the tool met
 * as data rather than as an exception (a signer call that never reached the enclave); an exception
 * thrown anywhere ends the same way. The message goes to stderr; without one, the tool has already
 * said why in its own output.
 */
export type CliOutcome = { exit: "done" } | { exit: "refused" | "error"; message?: string };

export const DONE: CliOutcome = { exit: "done" };

export function refused(message?: string): CliOutcome {
  return { exit: "refused", message };
}

export function errored(message: string): CliOutcome {
  return { exit: "error", message };
}

export type CliContext = {
  env: Record<string, string | undefined>;
  /**
   * Runs `cleanup` on SIGINT or SIGTERM, then exits 130. Without it a signal still ends the tool
   * with 130, having stopped the embedded Postgres it started (if it did).
   */
  onInterrupt(cleanup: () => Promise<void>): void;
};

export type CliTool = {
  /** The prefix of the shell's lines (`agents: …`). */
  name: string;
  /** Printed after the message of a usage error. */
  usage: string;
  run(argv: string[], context: CliContext): Promise<CliOutcome>;
  /**
   * Other numbers for some outcomes, for a tool whose codes a specification fixes (the canary's
   * verdicts). Every other tool keeps EXIT_CODES.
   */
  exitCodes?: Partial<Record<ExitKind, number>>;
};

/** How a run ended: the outcome it returned, or what it threw (or what was thrown beside it). */
type CliEnding = { outcome: CliOutcome } | { thrown: unknown };

/** The exit code and the shell's own text on stderr (empty, or whole lines). */
type CliExit = { code: number; stderr: string };

/** The exit of `tool` for how its run ended; `env` names the secrets to keep out of the text. */
function exitOf(
  tool: Pick<CliTool, "name" | "usage" | "exitCodes">,
  ending: CliEnding,
  env: Record<string, string | undefined>,
): CliExit {
  const codes = { ...EXIT_CODES, ...tool.exitCodes };
  const line = (text: string): string => `${tool.name}: ${oneLine(redact(text, env))}\n`;
  if ("outcome" in ending) {
    const { outcome } = ending;
    switch (outcome.exit) {
      case "done":
        return { code: codes.done, stderr: "" };
      case "refused":
        return { code: codes.refused, stderr: outcome.message ? line(outcome.message) : "" };
      case "error":
        return { code: codes.error, stderr: outcome.message ? line(`error: ${outcome.message}`) : "" };
      default: {
        const unreachable: never = outcome;
        return exitOf(tool, { thrown: unreachable }, env);
      }
    }
  }
  const { thrown } = ending;
  if (isUsageError(thrown)) {
    // A usage message may list several lines (every bad variable of the environment): kept as given.
    const message = redact((thrown as Error).message, env).trimEnd();
    return { code: codes.usage, stderr: `${tool.name}: ${message}\n${tool.usage.trimEnd()}\n` };
  }
  if (env[DEBUG_ENV] === "1") {
    const shown = withoutQueryValues(thrown);
    const detail = redact(inspect(shown, { depth: 6, breakLength: Number.POSITIVE_INFINITY }), env);
    return { code: codes.error, stderr: `${tool.name}: error: ${detail}\n` };
  }
  const hint = schemaBehind(thrown) ? `; ${MIGRATE_HINT}` : "";
  return { code: codes.error, stderr: line(`error: ${summary(thrown)}${hint}`) };
}

/** Postgres's codes for a table or a column the statement names and the database lacks. */
const SCHEMA_MISSING_CODES = new Set(["42P01", "42703"]);

const MIGRATE_HINT =
  "the database is not migrated to this version: run `npm run migrate` with the same DATABASE_URL (or none, for the embedded cluster)";

/**
 * Whether `thrown`, or one of its causes, is Postgres finding no such table or column: a database
 * nobody migrated (a fresh cluster, a new DATABASE_URL) or one migrated by an older version.
 */
function schemaBehind(thrown: unknown): boolean {
  let current: unknown = thrown;
  for (let depth = 0; depth < 5 && current instanceof Error; depth += 1) {
    if ("code" in current && SCHEMA_MISSING_CODES.has(String(current.code))) return true;
    current = current.cause;
  }
  return false;
}

/**
 * Runs `tool` with this process's arguments and environment and exits with its code. An exception
 * outside the run's promise (an error event nobody listened for, a rejection nobody awaited) ends
 * it the same way as one thrown by the run, without waiting for the run's cleanup.
 */
export function runCli(tool: CliTool): void {
  const env = process.env;
  let exiting = false;
  const finish = (ending: CliEnding): void => {
    if (exiting) return;
    exiting = true;
    const { code, stderr } = exitOf(tool, ending, env);
    if (stderr) process.stderr.write(stderr);
    process.exit(code);
  };
  process.on("uncaughtException", (thrown) => finish({ thrown }));
  process.on("unhandledRejection", (thrown) => finish({ thrown }));
  // Node would exit 0 when nothing is left to wait for, though the run never said how it ended.
  process.once("beforeExit", () => finish({ thrown: new Error("the run ended without an outcome (a bug)") }));
  // Every tool hears SIGINT and SIGTERM: ended by the signal there and then, one that had started
  // the embedded Postgres (no stack running) left it running on its folder and port, in the way of
  // the next start. The tool's own cleanup runs first (the restore drill's throwaway enclave).
  const cleanups: Array<() => Promise<void>> = [];
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      if (exiting) return;
      exiting = true;
      process.stderr.write(`${tool.name}: interrupted (${signal})\n`);
      const code = tool.exitCodes?.interrupted ?? EXIT_CODES.interrupted;
      void Promise.allSettled(cleanups.map((cleanup) => cleanup()))
        .then(() => stopOwnedClusters())
        .finally(() => process.exit(code));
    });
  }
  const context: CliContext = {
    env,
    onInterrupt(cleanup) {
      cleanups.push(cleanup);
    },
  };
  const argv = process.argv.slice(2);
  // `TOOL --help` alone: the usage on stdout and done, as every tool's own (funding's) did; no tool
  // takes --help as a command, so nothing is run or opened for it.
  if (asksForHelp(argv)) {
    process.stdout.write(`${tool.usage.trimEnd()}\n`);
    finish({ outcome: DONE });
    return;
  }
  Promise.resolve()
    .then(() => tool.run(argv, context))
    .then(
      (outcome) => finish({ outcome }),
      (thrown: unknown) => finish({ thrown }),
    );
}

/**
 * Refuses a flag the command does not take (`list --agent ID`, `retire-key --reason TEXT`): passed
 * over, it would read as a filter applied or a reason recorded when neither was. `values` is
 * node:util parseArgs's, which holds only the flags given.
 */
export function refuseFlagsNotTaken(
  command: string,
  values: Record<string, unknown>,
  takes: readonly string[],
): void {
  const extra = Object.keys(values).filter((name) => values[name] !== undefined && !takes.includes(name));
  if (extra.length > 0) {
    throw new UsageError(`${command} takes no ${extra.map((name) => `--${name}`).join(", ")}`);
  }
}

/**
 * Reads a file named on the command line with `read`. A file that cannot be read, or does not
 * hold what `holds` says, is the command line's fault: a usage error naming the flag, the path and
 * the error code, never the file's text (it may be a key).
 */
export async function readArgumentFile<T>(
  flag: string,
  path: string,
  holds: string,
  read: (path: string) => Promise<T>,
): Promise<T> {
  try {
    return await read(path);
  } catch (error) {
    const code = error instanceof Error && "code" in error ? String(error.code) : `not ${holds}`;
    throw new UsageError(`cannot read ${flag} ${path} (${code})`);
  }
}

/** The bytes of a file named on the command line (readArgumentFile). */
export function readArgumentBytes(flag: string, path: string): Promise<Uint8Array> {
  return readArgumentFile(
    flag,
    path,
    "a readable file",
    async (file) => new Uint8Array(await readFile(file)),
  );
}

function isUsageError(thrown: unknown): boolean {
  if (thrown instanceof UsageError) return true;
  // node:util parseArgs: an unknown option, a missing value, a positional where none is taken.
  const code = thrown instanceof Error && "code" in thrown ? String(thrown.code) : "";
  return code.startsWith("ERR_PARSE_ARGS");
}

/** The messages of an error and its causes, outermost first, as one line. */
function summary(thrown: unknown): string {
  const parts: string[] = [];
  let current: unknown = thrown;
  for (let depth = 0; depth < 5 && current !== undefined; depth += 1) {
    parts.push(messageOf(current));
    current = current instanceof Error ? current.cause : undefined;
  }
  return parts.filter((part, i) => part !== parts[i - 1]).join(": ");
}

function messageOf(thrown: unknown): string {
  if (!(thrown instanceof Error)) return String(thrown);
  // drizzle's query error carries the statement and its parameters in its message: the cause says
  // what went wrong.
  if ("query" in thrown && "params" in thrown) return "database query failed";
  // A connection tried on several addresses fails with an empty message and one error per address.
  if (thrown instanceof AggregateError && !thrown.message)
    return thrown.errors.map(messageOf).join("; ") || "AggregateError";
  const code = "code" in thrown ? String(thrown.code) : "";
  return thrown.message || code || thrown.name;
}

/** What OPS_DEBUG shows in place of a failed query's values. */
const WITHHELD = "[withheld]";

/**
 * `thrown` with the values of a failed query taken out, for OPS_DEBUG: the statement, the stack and
 * Postgres's code and constraint stay. drizzle's error lists the statement's parameters in its
 * message (and so its stack) and in `params`; Postgres's `detail` echoes the row or key it refused
 * ("Failing row contains (…)"). Either may hold a secret no variable names (a webhook endpoint's,
 * a token's hash), which redact() cannot know. Changed in place: the process exits once it is
 * printed.
 */
function withoutQueryValues(thrown: unknown): unknown {
  let current: unknown = thrown;
  for (let depth = 0; depth < 8 && current instanceof Error; depth += 1) {
    const error: Error & { query?: unknown; params?: unknown; detail?: unknown } = current;
    if ("query" in error && "params" in error) {
      const message = `Failed query: ${String(error.query)}\nparams: ${WITHHELD}`;
      if (error.stack) error.stack = error.stack.replace(error.message, () => message);
      error.message = message;
      error.params = WITHHELD;
    }
    if (typeof error.detail === "string") error.detail = WITHHELD;
    current = error.cause;
  }
  return thrown;
}

const MAX_LINE = 1_000;

function oneLine(text: string): string {
  const flat = text.replace(/\s*\n\s*/g, " ").trim();
  return flat.length > MAX_LINE ? `${flat.slice(0, MAX_LINE)}…` : flat;
}

/** Variables whose values are secrets, whatever else they are called. */
const SECRET_NAME = /SECRET|TOKEN|PASSWORD|PASSPHRASE|PRIVATE|API_KEY/i;
/** The password of a URL with credentials (`postgres://user:password@host`). */
const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s:@/]*):[^\s@/]+@/gi;
/** An agent's bearer token (origin/auth/token.ts). */
const AGENT_TOKEN = /agt_[0-9a-f]{32}_[0-9a-f]{64}/g;
/** Shorter values would be replaced inside ordinary words. */
const MIN_SECRET_LENGTH = 8;

/**
 * `text` without any secret of `env` (the values of secret-named variables, the passwords of URLs
 * with credentials), any URL's password or any agent token. Exported for its test.
 */
export function redact(text: string, env: Record<string, string | undefined>): string {
  let out = text;
  for (const secret of secretsOf(env)) out = out.split(secret).join("[redacted]");
  return out.replace(URL_PASSWORD, "$1:[redacted]@").replace(AGENT_TOKEN, "agt_[redacted]");
}

function secretsOf(env: Record<string, string | undefined>): string[] {
  const secrets = new Set<string>();
  for (const [name, value] of Object.entries(env)) {
    if (!value) continue;
    if (SECRET_NAME.test(name)) secrets.add(value);
    if (!value.includes("://")) continue;
    try {
      const { password } = new URL(value);
      if (password) {
        secrets.add(password);
        secrets.add(decodeURIComponent(password));
      }
    } catch {
      // Not a URL: nothing more to take from it.
    }
  }
  // Longest first, so a secret that contains another is replaced whole.
  return [...secrets]
    .filter((secret) => secret.length >= MIN_SECRET_LENGTH)
    .sort((a, b) => b.length - a.length);
}
