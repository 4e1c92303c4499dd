/**
 * The origin's command line: nothing but `--help`. It is configured by its environment alone
 * (docs/configuration.md), so an argument is a mistake, refused before anything is opened: asking
 * for help once started a server on the default database and port.
 */
export const ORIGIN_USAGE = `usage: npm run origin (with the node's environment: docs/configuration.md)
  serves the gateway, registration, x402 and the console on ORIGIN_HOST:ORIGIN_PORT
  (default 127.0.0.1:8788), with DATABASE_URL, or the local stack's embedded cluster
  it takes no arguments; -h, --help prints this`;

export type OriginCommand =
  | { command: "serve" }
  | { command: "help" }
  | { command: "usage"; message: string };

/** What the arguments ask for: serving (none), the usage (`--help` or `-h` alone), or a usage error. */
export function parseOriginArgs(argv: readonly string[]): OriginCommand {
  if (argv.length === 0) return { command: "serve" };
  if (argv.length === 1 && (argv[0] === "--help" || argv[0] === "-h")) return { command: "help" };
  return {
    command: "usage",
    message: `takes no arguments (it is configured by its environment), not: ${argv.join(" ")}`,
  };
}
