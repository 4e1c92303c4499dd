/**
 * A tool on the operators' CLI shell (ops/lib/cli-shell.ts) whose first argument says how its run
 * ends, for ops/lib/cli-shell.test.ts, which runs it as a child process and reads its exit code.
 * PROBE_EXIT_CODES (JSON) stands for a tool with its own numbers, as the canary has.
 */
import { parseArgs } from "node:util";
import pg from "pg";
import {
  type CliContext,
  type CliOutcome,
  DONE,
  errored,
  readArgumentFile,
  refused,
  runCli,
  UsageError,
} from "../ops/lib/cli-shell.ts";

/** A run that never ends by itself, the process kept alive as a connection keeps it. */
const never = (): Promise<CliOutcome> => {
  setInterval(() => {}, 60_000);
  return new Promise(() => {});
};

const endings: Record<string, (argv: string[], context: CliContext) => Promise<CliOutcome>> = {
  async done() {
    process.stdout.write("probe: done\n");
    return DONE;
  },
  refused: async () => refused("no agent 7"),
  async "refused-in-its-report"() {
    process.stdout.write("probe: batch 7: refused: hash_mismatch\nprobe: 0 restored, 1 refused\n");
    return refused();
  },
  errored: async () => errored("get_policy: signer_unreachable"),
  async usage() {
    throw new UsageError("--reason is required");
  },
  async "unknown-option"(argv) {
    parseArgs({ args: argv, options: { reason: { type: "string" } }, strict: true });
    return DONE;
  },
  async "unreadable-key"(argv) {
    await readArgumentFile("--key", argv[0]!, "a 32-byte hex seed", async () => {
      throw new Error(`not hex: ${argv[1]}`);
    });
    return DONE;
  },
  /** A real driver against a port nobody listens on, with the password in the URL it was given. */
  async database(_argv, { env }) {
    const client = new pg.Client({
      connectionString: env.PROBE_DATABASE_URL,
      connectionTimeoutMillis: 5_000,
    });
    await client.connect();
    return DONE;
  },
  async "secret-in-message"(_argv, { env }) {
    throw new Error(
      `could not use ${env.PROBE_DATABASE_URL} with ${env.PROBE_API_TOKEN} for agt_${"a".repeat(32)}_${"b".repeat(64)}`,
      { cause: new Error(`the server said: secret ${env.PROBE_API_TOKEN}`) },
    );
  },
  async "throws-string"() {
    throw "a bare string";
  },
  async "multi-line"() {
    throw new Error("first line\n  second line");
  },
  async "uncaught-in-timer"() {
    setTimeout(() => {
      throw new Error("from a timer nobody awaited");
    }, 10);
    return never();
  },
  async "unhandled-rejection"() {
    void Promise.reject(new Error("a rejection nobody awaited"));
    return never();
  },
  /** A promise nothing will settle and nothing keeps the process alive for. */
  unsettled: () => new Promise(() => {}),
  async interruptible(_argv, { onInterrupt }) {
    onInterrupt(async () => {
      process.stdout.write("probe: cleaned up\n");
    });
    process.stdout.write("probe: waiting\n");
    return never();
  },
};

runCli({
  name: "probe",
  usage: "usage: probe CASE [options]",
  async run([ending = "", ...argv], context) {
    const run = endings[ending];
    if (!run) throw new UsageError(`unknown case '${ending}'`);
    return run(argv, context);
  },
  exitCodes: process.env.PROBE_EXIT_CODES ? JSON.parse(process.env.PROBE_EXIT_CODES) : undefined,
});
