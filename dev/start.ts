/**
 * `npm start`: the whole stack on one machine with embedded defaults (docs/configuration.md, "The local
 * stack"; the parts and their order are in dev/local-stack.ts), then the URLs and an operator-provisioned
 * agent token. Ctrl-C stops every part, last started first.
 *
 * Environment: START_DATA_DIR (default .data), ORIGIN_PORT (8788), DEVNET_PORT (8545),
 * EDGE_PORT (8787), EMBEDDED_PG_PORT (54320), BASE_PATH (/77), AGENT_ENV_ID (local-dev),
 * START_NEW_ENCLAVE (unset; `1` initialises a new enclave beside a database with identities).
 * A variable set empty (`NAME=`) means its default.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { errorMessage } from "../shared/error-message.ts";
import { noArgumentsCommand } from "../shared/no-arguments.ts";
import { ignoreUnreadOutput } from "../shared/node/unread-output.ts";
import { createLocalStack } from "./local-stack.ts";
import { START_USAGE } from "./start-usage.ts";

// A launcher whose output nobody reads any more (a closed terminal, `npm start | tee` with tee gone)
// goes on, and stops its parts as usual at a Ctrl-C or SIGTERM: the EPIPE of its next line would
// otherwise end it at once and leave its Postgres running on the data folder.
ignoreUnreadOutput();

const say = (line: string): void => {
  process.stdout.write(`[start] ${line}\n`);
};

/**
 * The value of `variable`, or `fallback` when it is unset or empty: `NAME=` (as shells and .env
 * files write it) means unset, as the ports and the origin read it (origin/config.ts). An empty
 * START_DATA_DIR resolved to the working folder, and the stack wrote its keys, cluster and chain
 * into it (the repository's root, as npm start runs).
 */
function settingFrom(variable: string, fallback: string): string {
  const value = process.env[variable];
  return value === undefined || value.trim() === "" ? fallback : value;
}

/**
 * The port `variable` names, or `fallback` when it is unset or empty. Anything else than a port
 * ends the launcher before it starts or makes anything, naming the variable: a port 0 would start
 * a part on a port the launcher cannot know, and a word reached the first listen as NaN.
 */
function portFrom(variable: string, fallback: number): number {
  const value = process.env[variable]?.trim();
  if (value === undefined || value === "") return fallback;
  const port = /^[0-9]+$/.test(value) ? Number(value) : Number.NaN;
  if (port >= 1 && port <= 65_535) return port;
  say(`failed: ${variable} must be a port number from 1 to 65535, not ${JSON.stringify(value)}`);
  process.exit(1);
}

// Before any variable is read or anything made: `--help` starting the whole stack surprised.
const args = noArgumentsCommand(process.argv.slice(2));
if (args === "help") {
  process.stdout.write(`${START_USAGE}\n`);
  process.exit(0);
}
if (args === "refused") {
  process.stderr.write(`[start] takes no arguments, only its environment\n${START_USAGE}\n`);
  process.exit(2);
}

const dataDir = path.resolve(settingFrom("START_DATA_DIR", ".data"));
const originPort = portFrom("ORIGIN_PORT", 8788);
const devnetPort = portFrom("DEVNET_PORT", 8545);
const edgePort = portFrom("EDGE_PORT", 8787);
const pgPort = portFrom("EMBEDDED_PG_PORT", 54320);
const basePath = settingFrom("BASE_PATH", "/77");
const envId = settingFrom("AGENT_ENV_ID", "local-dev");
/** The stack's variables this start was given, which a command it suggests repeats. */
const givenSettings = Object.fromEntries(
  [
    "START_DATA_DIR",
    "EMBEDDED_PG_PORT",
    "DEVNET_PORT",
    "ORIGIN_PORT",
    "EDGE_PORT",
    "BASE_PATH",
    "AGENT_ENV_ID",
    "START_NEW_ENCLAVE",
  ].flatMap((variable) => {
    const value = process.env[variable];
    return value?.trim() ? [[variable, value]] : [];
  }),
);

async function main(): Promise<void> {
  const started = Date.now();
  let exiting = false;
  const stack = createLocalStack({
    dataDir,
    originPort,
    devnetPort,
    edgePort,
    pgPort,
    basePath,
    envId,
    givenSettings,
    allowNewEnclave: process.env.START_NEW_ENCLAVE === "1",
    say,
    // An enclave that dies is started again on its socket and data folder (the origin reconnects);
    // any other part that dies stops the stack.
    restartEnclave: true,
    onPartExit: (name, code) => {
      say(`${name} exited unexpectedly (${code}); stopping the stack`);
      void stopAll(1);
    },
  });
  const stopAll = async (code: number): Promise<void> => {
    // A second Ctrl-C (or a SIGTERM) while the parts stop is not a reason to leave before they
    // have: exiting then left the embedded Postgres running on the data folder and its port, in
    // the next start's way. The first stop ends the run.
    if (exiting) {
      say("still stopping: the parts stop last started first, Postgres last");
      return;
    }
    exiting = true;
    await stack.stop();
    process.exit(code);
  };
  process.on("SIGINT", () => void stopAll(0));
  process.on("SIGTERM", () => void stopAll(0));

  try {
    const ready = await stack.start();
    const { edgeUrl, originUrl, devnetUrl, agent, authority } = ready;
    say(`ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    say(`edge       ${edgeUrl}${basePath}`);
    say(`origin     ${originUrl}${basePath}`);
    say(`health     ${originUrl}${basePath}/healthz`);
    say(`gateway    ${originUrl}${basePath}/agent/v1/network`);
    say(`devnet     ${devnetUrl} (chain 77)`);
    say(`enclave    unix://${ready.socketPath} (env ${envId})`);
    if (agent) {
      if (agent.replaced) {
        const { agentId, wallet, why } = agent.replaced;
        say(`agent      a new local agent: the saved one, ${agentId} (wallet ${wallet}), ${why}`);
      }
      say(`agent      ${agent.agentId} wallet ${agent.wallet} (read, faucet, transfer)`);
      say(`token      ${agent.token}`);
      say(
        "paste these two lines into your shell (the CLI, the MCP server and the README's curls read them):",
      );
      // Unprefixed, so they paste as they are; the URL carries this run's ports, not the defaults.
      process.stdout.write(`export AGENT_BASE_URL=${edgeUrl}${basePath}\n`);
      process.stdout.write(`export AGENT_TOKEN=${agent.token}\n`);
      say('try        curl -H "Authorization: Bearer $AGENT_TOKEN" $AGENT_BASE_URL/agent/v1/balance');
      say(
        "           (the README's tour goes on with the CLI: a faucet payout, a transfer, an x402 payment)",
      );
    } else {
      say("agent      none yet: the key pool has no verified key (see the origin's log)");
    }
    // The policy as the database holds it, so a restarted stack says what it will answer.
    const { registration } = ready;
    // The operator tools find the default data folder's database and socket by themselves; another
    // folder or Postgres port is spelled out, so each command below runs against this stack as
    // printed (docs/operations.md#ports-and-their-variables).
    const usual = dataDir === path.resolve(".data");
    const toolEnv =
      usual && pgPort === 54320
        ? ""
        : `EMBEDDED_PG_DIR=${shellWord(shownPath(path.join(dataDir, "pg")))} EMBEDDED_PG_PORT=${pgPort} `;
    const socketFlag = usual ? "" : ` --socket ${shellWord(shownPath(ready.socketPath))}`;
    // An approval is sealed with the admin key, which the tool looks for in the default folder.
    const adminKeyEnv = usual
      ? ""
      : `AGENT_ADMIN_AUTHORITY_KEY_FILE=${shellWord(shownPath(authority.adminKeyFile))} `;
    say(
      registration.paused
        ? `register   switched on, policy paused: ${toolEnv}npm run registration -- open --reason "local testing"`
        : `register   open (${registration.perIpDaily} a day per address, ${registration.networkDaily} a day in all): agent-wallet register; pause with ${toolEnv}npm run registration -- pause --reason …`,
    );
    // At the console's origin (CONSOLE_ORIGIN, by default localhost at the origin's port), the one
    // address its passkeys work at: a browser takes no IP address as a relying party. The origin
    // checked the variable before it started.
    const consoleOrigin = new URL(settingFrom("CONSOLE_ORIGIN", `http://localhost:${originPort}`)).origin;
    say(`console    ${consoleOrigin}${basePath}/admin/agents (private origin only)`);
    say(`metrics    ${originUrl}${basePath}/metrics (Authorization: Bearer <adminApiToken>)`);
    say(
      `secrets    ${path.join(dataDir, "local-secrets.json")}: the console's tokens are adminApiToken and registrationAdminSecret (never printed)`,
    );
    say(`policy key ${authority.policyKeyFile} (npm run enclave-policy; never given to the origin)`);
    // The path only: the key's contents are never printed.
    const operatorKey = shownPath(ready.operator.keyFile);
    if (ready.operator.revokedMovedTo !== undefined) {
      say(
        `operator   the key at ${operatorKey} was revoked: moved to ${shownPath(ready.operator.revokedMovedTo)}, and a new one made`,
      );
    }
    say(`operator   ${operatorKey} (operator key ${ready.operator.keyId}, enrolled; approves held actions)`);
    say(
      `           ${toolEnv}${adminKeyEnv}npm run policy -- approve --agent ID --action ID --operator-key ${shellWord(operatorKey)}${socketFlag}`,
    );
    if (existsSync(authority.recoveryKeyFile)) say(`recovery   ${authority.recoveryKeyFile} (keep offline)`);
    if (existsSync(authority.recoveryEncKeyFile)) {
      say(`recovery   ${authority.recoveryEncKeyFile} (encryption key of every backup; keep offline)`);
    }
    say("Ctrl-C stops everything");
  } catch (error) {
    // A Ctrl-C stops the parts the start-up is still using, which then fails: that stop ends the
    // run (exit 0, every part stopped), not this failure's exit in the middle of it.
    if (exiting) return;
    say(`failed: ${errorMessage(error)}`);
    await stopAll(1);
  }
}

/** `word` as a shell reads it back: as it is when it holds nothing the shell would change, else single-quoted. */
function shellWord(word: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

/** A path under the working folder as a relative one (what the operator types), any other as it is. */
function shownPath(file: string): string {
  const relative = path.relative(process.cwd(), file);
  return relative.startsWith("..") || path.isAbsolute(relative) ? file : relative;
}

void main();
