/**
 * The command line of a program configured by its environment alone (the origin, `npm start`, the
 * MCP server): `--help` or `-h` alone asks for its usage, no argument runs it, and anything else is
 * a usage error, refused before anything is opened or started. The refusal never repeats what was
 * given: a token or a database URL typed as an argument would land in a terminal or a host's logs.
 */
export type NoArgumentsCommand = "run" | "help" | "refused";

export function noArgumentsCommand(argv: readonly string[]): NoArgumentsCommand {
  if (argv.length === 0) return "run";
  return asksForHelp(argv) ? "help" : "refused";
}

/** `--help` or `-h` alone: every program's and tool's request for its usage, answered with exit 0. */
export function asksForHelp(argv: readonly string[]): boolean {
  return argv.length === 1 && (argv[0] === "--help" || argv[0] === "-h");
}
