/**
 * The origin's command line: nothing but `--help` (shared/no-arguments.ts). It is configured by its
 * environment alone (docs/configuration.md); asking for help once started a server on the default
 * database and port.
 */
export const ORIGIN_USAGE = `usage: npm run origin (with the node's environment: docs/configuration.md)
  serves the gateway, registration, x402 and the console on ORIGIN_HOST:ORIGIN_PORT
  (default 127.0.0.1:8788), with DATABASE_URL, or the local stack's embedded cluster
  it takes no arguments; -h, --help prints this`;
