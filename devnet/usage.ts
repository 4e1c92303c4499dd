/** `npm run devnet -- --help` (docs/development.md): the options of devnet/main.ts. */
export const DEVNET_USAGE = `usage: npm run devnet -- [--port N] [--host ADDR] [--state FILE] [--operator-pool ADDR]
  --port N              listen port (default: DEVNET_PORT, else 8545; 0 = any free port)
  --host ADDR           listen address (default 127.0.0.1)
  --state FILE          load state from FILE if it exists, save it there on exit
  --operator-pool ADDR  operator-pool address (default: the dev operator pool)
  -h, --help            this text
prints one line with its URL on stdout, logs on stderr; SIGINT or SIGTERM saves the state and exits`;
