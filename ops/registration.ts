/**
 * `npm run registration -- <command>`: the operator's registration policy tool, on the settings
 * service the console will use (origin/registration/settings.ts). Uses the node's configuration
 * (DATABASE_URL, or the embedded cluster of the running stack).
 *
 *   status                                   settings, counters, key stock and the last changes
 *   open  --reason TEXT                      paused → false
 *   pause --reason TEXT                      paused → true
 *   set NAME VALUE [NAME VALUE …] --reason TEXT
 *       NAME: paused, per_ip_daily, network_daily, total_ceiling, key_reserve,
 *             attempts_per_ip_per_minute, attempts_global_per_minute
 *
 * Every change prints `NAME: before → after`. A refusal (unknown setting, a value out of range,
 * an empty reason, bad usage) is a usage error: its line and the usage, exit 2, changing nothing
 * (docs/operations.md#exit-codes-of-the-operator-tools).
 */
import { openDatabase } from "../origin/db/open.ts";
import {
  changeRegistrationSettings,
  parseSettingValue,
  REGISTRATION_SETTINGS,
  readRegistrationStatus,
  type SettingsRefusal,
} from "../origin/registration/settings.ts";
import { type CliContext, type CliOutcome, DONE, runCli, UsageError } from "./lib/cli-shell.ts";
import { nodeConfig } from "./lib/node-config.ts";

const USAGE =
  "usage: npm run registration -- status | open --reason TEXT | pause --reason TEXT | set NAME VALUE --reason TEXT";

async function run(argv: string[], { env }: CliContext): Promise<CliOutcome> {
  // Parsed by hand: node's parseArgs would take a value such as `-1` for an option.
  const positionals: string[] = [];
  let reasonGiven: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === "--reason") {
      if (i + 1 >= argv.length) throw new UsageError("--reason needs a value");
      reasonGiven = argv[++i]!;
    } else if (arg.startsWith("--reason=")) reasonGiven = arg.slice("--reason=".length);
    else if (arg.startsWith("--")) throw new UsageError(`unknown option '${arg}'`);
    else positionals.push(arg);
  }
  const [command, ...rest] = positionals;
  const reason = reasonGiven ?? "";
  let changes: Record<string, string> | undefined;
  switch (command) {
    case "status":
      if (rest.length > 0 || reasonGiven !== undefined) throw new UsageError("status takes no arguments");
      break;
    case "open":
    case "pause":
      if (rest.length > 0) throw new UsageError(`${command} takes only --reason`);
      changes = { paused: command === "pause" ? "true" : "false" };
      break;
    case "set":
      if (rest.length === 0 || rest.length % 2 !== 0) throw new UsageError("set needs NAME VALUE pairs");
      changes = {};
      for (let i = 0; i < rest.length; i += 2) {
        // The second value would replace the first without a word: which one was meant?
        if (Object.hasOwn(changes, rest[i]!)) throw new UsageError(`${rest[i]} is named twice`);
        changes[rest[i]!] = rest[i + 1]!;
      }
      break;
    default:
      throw new UsageError(command ? `unknown command '${command}'` : "no command");
  }
  if (changes && reason.trim() === "") throw new UsageError("--reason is required and must not be empty");
  // Each name and value is checked again by the settings service under its lock; checked here too
  // so that a mistyped line opens no database (nor starts the embedded cluster) to be refused.
  for (const [name, value] of Object.entries(changes ?? {})) {
    const parsed = parseSettingValue(name, value);
    if (!parsed.ok) throw new UsageError(describe(parsed.error));
  }

  const config = nodeConfig(env);
  const database = await openDatabase(config, 2);
  try {
    if (!changes) {
      const status = await readRegistrationStatus(database.db, new Date());
      process.stdout.write(`${JSON.stringify(status, null, 2)}\n`);
      return DONE;
    }
    const result = await changeRegistrationSettings(database.db, { changes, reason, source: "cli" });
    if (!result.ok) throw new UsageError(describe(result.error));
    if (result.value.changed.length === 0) process.stdout.write("registration: no change (already so)\n");
    for (const change of result.value.changed) {
      process.stdout.write(`registration: ${change.setting}: ${change.before} → ${change.after}\n`);
    }
    process.stdout.write(`registration: paused is ${result.value.after.paused}\n`);
    return DONE;
  } finally {
    await database.close();
  }
}

function describe(refusal: SettingsRefusal): string {
  switch (refusal.code) {
    case "unknown_setting":
      return `unknown setting '${refusal.setting}'; settings: ${Object.keys(REGISTRATION_SETTINGS).join(", ")}`;
    case "invalid_value":
      return `${refusal.setting} ${refusal.message}`;
    case "empty_reason":
      return "--reason is required and must not be empty";
    case "no_change_requested":
      return "no setting given";
    default: {
      const unreachable: never = refusal;
      return String(unreachable);
    }
  }
}

runCli({ name: "registration", usage: USAGE, run });
