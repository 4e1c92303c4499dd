/**
 * `npm run agents -- <command>`: the operator's identity tool. Uses the node's configuration
 * (DATABASE_URL, or the embedded cluster of the running stack).
 *
 *   create --capabilities read,faucet,transfer   prints {token, agent_id, assigned_wallet, capabilities}
 *   list                                         identities, newest first (never tokens)
 *   disable --agent ID --reason TEXT             reversible; applies at the next request
 *   enable --agent ID --reason TEXT              re-enables a disabled identity
 *   revoke --agent ID --reason TEXT              final: the token never works again
 *
 * disable, enable and revoke record the change, before, after and reason in identity_changes (the
 * console's audit), through the same services as the console.
 *   rotate-token --agent ID                      a new token for the same identity, printed once
 *                                                as {token, agent_id, assigned_wallet, capabilities};
 *                                                the old token fails from its next request on
 *
 * Exit codes: docs/operations.md#exit-codes-of-the-operator-tools.
 */
import { parseArgs } from "node:util";
import { rotateToken } from "../origin/auth/rotate-token.ts";
import { CommitOutcomeUnknown } from "../origin/db/lost-commit.ts";
import { openDatabase } from "../origin/db/open.ts";
import { listIdentities, revokeIdentity, setIdentityEnabled } from "../origin/identity/identity-admin.ts";
import {
  type ProvisionFailure,
  ProvisionOutcomeUnknown,
  provisionIdentity,
} from "../origin/keypool/provision.ts";
import { CAPABILITIES } from "../shared/constants.ts";
import { isUuid } from "../shared/uuid.ts";
import {
  type CliContext,
  type CliOutcome,
  DONE,
  errored,
  refused,
  refuseFlagsNotTaken,
  runCli,
  UsageError,
} from "./lib/cli-shell.ts";
import { nodeConfig } from "./lib/node-config.ts";

const USAGE = `usage: npm run agents -- create --capabilities read,faucet,transfer
       npm run agents -- list
       npm run agents -- disable|enable|revoke --agent ID --reason TEXT
       npm run agents -- rotate-token --agent ID`;

/** The flags each command takes; another is a usage error. */
const TAKES = {
  create: ["capabilities", "json"],
  list: ["json"],
  disable: ["agent", "reason"],
  enable: ["agent", "reason"],
  revoke: ["agent", "reason"],
  "rotate-token": ["agent", "json"],
} as const satisfies Record<string, readonly string[]>;

/** A command line of this tool, every argument checked: nothing is opened for a bad one. */
type AgentsCommand =
  | { command: "create"; capabilities: string[] }
  | { command: "list" }
  | { command: "disable" | "enable" | "revoke"; agentId: string; reason: string }
  | { command: "rotate-token"; agentId: string };

function parseCommand(argv: string[]): AgentsCommand {
  const [command, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: {
      capabilities: { type: "string" },
      agent: { type: "string" },
      reason: { type: "string" },
      json: { type: "boolean" },
    },
    strict: true,
  });
  const agentId = (): string => {
    if (!values.agent || !isUuid(values.agent)) throw new UsageError("--agent must be an agent id (a UUID)");
    return values.agent;
  };
  // --json changes nothing where the output is JSON already, and is refused where it is a line.
  const takes = command && Object.hasOwn(TAKES, command) ? TAKES[command as keyof typeof TAKES] : undefined;
  if (takes) refuseFlagsNotTaken(command!, values, takes);
  switch (command) {
    case "create": {
      if (!values.capabilities) throw new UsageError("--capabilities is required, e.g. read,transfer");
      const capabilities = values.capabilities.split(",").map((item) => item.trim());
      // A name the node does not grant is the line's mistake: exit 2 before the database is opened.
      const unknown = capabilities.filter((item) => !(CAPABILITIES as readonly string[]).includes(item));
      if (unknown.length > 0) {
        throw new UsageError(
          `--capabilities must be a non-empty subset of ${CAPABILITIES.join(", ")}, not ${unknown.map((item) => `'${item}'`).join(", ")}`,
        );
      }
      return { command, capabilities };
    }
    case "list":
      return { command };
    case "disable":
    case "enable":
    case "revoke": {
      const id = agentId();
      if (!values.reason?.trim()) throw new UsageError(`--reason is required to ${command}`);
      return { command, agentId: id, reason: values.reason };
    }
    case "rotate-token":
      return { command, agentId: agentId() };
    default:
      throw new UsageError(command ? `unknown command '${command}'` : "no command");
  }
}

/**
 * The operator's reason for a refused create: what happened and what to do, with the API's code
 * (docs/api.md#identities-keys-and-the-sweep) for a search; the code alone says neither.
 */
function provisionRefusal(failure: ProvisionFailure): string {
  switch (failure.code) {
    case "validation_failed":
      return failure.message;
    case "agent_key_pool_busy":
      return "every free key is being claimed by another provisioning at this moment (agent_key_pool_busy); nothing was made: run it again";
    case "agent_key_pool_exhausted":
      return (
        "no free key in the pool (agent_key_pool_exhausted); nothing was made: the origin's key-pool refill " +
        "makes keys while it runs with the enclave (docs/operations.md#the-key-pool-refills-on-demand); " +
        'run it again once origin_key_pool_keys{state="free"} is above 0'
      );
  }
}

async function run(argv: string[], { env }: CliContext): Promise<CliOutcome> {
  // Checked before the database is opened: a mistyped line must not start (or create) the embedded
  // cluster only to be told so.
  const parsed = parseCommand(argv);
  const database = await openDatabase(nodeConfig(env), 2);
  try {
    const { db } = database;
    switch (parsed.command) {
      case "create": {
        const result = await provisionIdentity(db, {
          capabilities: parsed.capabilities,
          origin: "operator",
        }).catch((error: unknown) => {
          if (error instanceof ProvisionOutcomeUnknown) return error;
          throw error;
        });
        if (result instanceof ProvisionOutcomeUnknown) {
          // The identity may be there with a token nobody was shown: the operator can only find it
          // by its id, and give it a token of its own.
          return errored(
            `${result.message}; if \`npm run agents -- list\` shows it, its token was never shown: ` +
              `give it one with \`npm run agents -- rotate-token --agent ${result.agentId}\``,
          );
        }
        if (!result.ok) return refused(provisionRefusal(result.error));
        const { token, agentId: id, assignedWallet, capabilities: granted } = result.value;
        process.stdout.write(
          `${JSON.stringify({ token, agent_id: id, assigned_wallet: assignedWallet, capabilities: granted })}\n`,
        );
        return DONE;
      }
      case "list": {
        const rows = await listIdentities(db);
        process.stdout.write(
          `${JSON.stringify(
            rows.map((row) => ({
              agent_id: row.agentId,
              assigned_wallet: row.assignedWallet,
              capabilities: row.capabilities,
              enabled: row.enabled,
              revoked: row.revoked,
              origin: row.origin,
              created_at: row.createdAt.toISOString(),
              last_verified_at: row.lastVerifiedAt?.toISOString() ?? null,
              disabled_reason: row.disabledReason,
            })),
            null,
            2,
          )}\n`,
        );
        return DONE;
      }
      case "disable":
      case "enable": {
        const { command, agentId: id, reason } = parsed;
        const result = await setIdentityEnabled(db, {
          agentId: id,
          enabled: command === "enable",
          reason,
          source: "cli",
        });
        if (!result.ok) {
          return refused(result.error === "not_found" ? `no agent ${id}` : result.error);
        }
        process.stdout.write(
          `agents: ${id} ${result.value.changed ? `${command}d` : `was already ${command}d`}${
            // As the console answers `revoked: true`: "enabled" alone would read as a working token.
            result.value.revoked && command === "enable"
              ? "; it is revoked, so its token stays refused (revocation is final)"
              : ""
          }\n`,
        );
        return DONE;
      }
      case "rotate-token": {
        const id = parsed.agentId;
        const result = await rotateToken(db, { agentId: id }).catch((error: unknown) => {
          if (error instanceof CommitOutcomeUnknown) return error;
          throw error;
        });
        if (result instanceof CommitOutcomeUnknown) {
          // The old token may be gone with the new one never shown; another rotation replaces
          // whichever is there.
          return errored(
            `the token of ${id} may have been replaced (the old one may no longer work): ${result.message}; ` +
              `run \`npm run agents -- rotate-token --agent ${id}\` again for a token that works either way`,
          );
        }
        if (!result.ok) {
          switch (result.error) {
            case "not_found":
              return refused(`no agent ${id}`);
            case "token_replaced":
              // Only a rotation that names the token it replaces (the agent's own) can find it gone.
              throw new Error("an operator's rotation names no token");
            case "revoked":
              return refused(`${id} is revoked; revocation is final, no token brings it back`);
          }
        }
        const { token, agentId: rotatedId, assignedWallet, capabilities, enabled } = result.value;
        // Shown once, on stdout only, like a created identity's token; never logged.
        process.stdout.write(
          `${JSON.stringify({ token, agent_id: rotatedId, assigned_wallet: assignedWallet, capabilities })}\n`,
        );
        process.stderr.write(
          `agents: ${id} has a new token; the old one fails from its next request on${enabled ? "" : " (the identity is disabled: the new token works once it is enabled)"}\n`,
        );
        return DONE;
      }
      case "revoke": {
        const { agentId: id, reason } = parsed;
        const result = await revokeIdentity(db, { agentId: id, reason, source: "cli" });
        if (!result.ok) {
          return refused(result.error === "not_found" ? `no agent ${id}` : result.error);
        }
        process.stdout.write(`agents: ${id} ${result.value.changed ? "revoked" : "was already revoked"}\n`);
        return DONE;
      }
    }
  } finally {
    await database.close();
  }
}

runCli({ name: "agents", usage: USAGE, run });
