/**
 * `npm start -- --help` (docs/configuration.md#the-local-stack): the launcher takes no arguments,
 * only its environment (shared/no-arguments.ts); asking for help once started the whole stack.
 */
export const START_USAGE = `usage: npm start (configured by its environment; it takes no arguments)
  the whole stack on this machine: embedded Postgres, the chain-77 devnet, the enclave, the origin
  and the edge, then their URLs and an agent token; Ctrl-C stops every part
  START_DATA_DIR     the data folder (default .data; rm -rf it to start afresh)
  ORIGIN_PORT        the origin's port (default 8788)
  DEVNET_PORT        the devnet's port (default 8545)
  EDGE_PORT          the edge's port (default 8787)
  EMBEDDED_PG_PORT   the embedded Postgres's port (default 54320)
  BASE_PATH          the base path of every route (default /77)
  AGENT_ENV_ID       the enclave's environment id (default local-dev)
  START_NEW_ENCLAVE  1: initialise a new enclave beside a database that has identities
  a variable set empty (START_DATA_DIR=) means its default, as if unset
  -h, --help         this text`;
