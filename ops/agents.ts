/**
 * `npm run agents -- <command>`: the operator's identity tool. Uses the node's configuration
 * (DATABASE_URL, or the embedded cluster of the running stack).
 *
 *   create --capabilities read,faucet,transfer   prints {token, agent_id, assigned_wallet, capabilities}
 *   list                                         identities, newest first (never tokens)
 *   disable --agent ID --reason TEXT             reversible; applies at the next request
 *   enable --agent ID --reason TEXT              re-enables a disabled identity
 *
 * disable and enable record before, after and reason in identity_changes (the console's audit),
 * through the same service as the console.
 *   revoke --agent ID                            final: the token never works again
 *   rotate-token --agent ID                      a new token for the same identity, printed once
 *                                                as {token, agent_id, assigned_wallet, capabilities};
 *                                                the old token fails from its next request on
 */
import { parseArgs } from "node:util";
import { rotateToken } from "../origin/auth/rotate-token.ts";
import { loadConfig } from "../origin/config.ts";
import { openDatabase } from "../origin/db/open.ts";
import { listIdentities, revokeIdentity, setIdentityEnabled } from "../origin/identity/identity-admin.ts";
import { provisionIdentity } from "../origin/keypool/provision.ts";
import { errorMessage } from "../shared/error-message.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

class UsageError extends Error {}

async function main(argv: string[]): Promise<number> {
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
  if (!command || !["create", "list", "disable", "enable", "revoke", "rotate-token"].includes(command)) {
    throw new UsageError("usage: npm run agents -- create|list|disable|enable|revoke|rotate-token [options]");
  }
  const agentId = (): string => {
    if (!values.agent || !UUID.test(values.agent))
      throw new UsageError("--agent must be an agent id (a UUID)");
    return values.agent;
  };

  const database = await openDatabase(loadConfig(process.env), 2);
  try {
    const { db } = database;
    switch (command) {
      case "create": {
        if (!values.capabilities) throw new UsageError("--capabilities is required, e.g. read,transfer");
        const capabilities = values.capabilities.split(",").map((item) => item.trim());
        const result = await provisionIdentity(db, { capabilities, origin: "operator" });
        if (!result.ok) {
          const message =
            result.error.code === "validation_failed" ? result.error.message : result.error.code;
          process.stderr.write(`agents: ${message}\n`);
          return 1;
        }
        const { token, agentId: id, assignedWallet, capabilities: granted } = result.value;
        process.stdout.write(
          `${JSON.stringify({ token, agent_id: id, assigned_wallet: assignedWallet, capabilities: granted })}\n`,
        );
        return 0;
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
        return 0;
      }
      case "disable":
      case "enable": {
        const id = agentId();
        if (!values.reason?.trim()) throw new UsageError(`--reason is required to ${command}`);
        const result = await setIdentityEnabled(db, {
          agentId: id,
          enabled: command === "enable",
          reason: values.reason,
          source: "cli",
        });
        if (!result.ok) {
          process.stderr.write(`agents: ${result.error === "not_found" ? `no agent ${id}` : result.error}\n`);
          return 1;
        }
        process.stdout.write(
          `agents: ${id} ${result.value.changed ? `${command}d` : `was already ${command}d`}\n`,
        );
        return 0;
      }
      case "rotate-token": {
        const id = agentId();
        const result = await rotateToken(db, { agentId: id });
        if (!result.ok) {
          switch (result.error) {
            case "not_found":
              process.stderr.write(`agents: no agent ${id}\n`);
              return 1;
            case "token_replaced":
              // Only a rotation that names the token it replaces (the agent's own) can find it gone.
              throw new Error("an operator's rotation names no token");
            case "revoked":
              process.stderr.write(
                `agents: ${id} is revoked; revocation is final, no token brings it back\n`,
              );
              return 1;
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
        return 0;
      }
      default: {
        const id = agentId();
        const result = await revokeIdentity(db, id);
        if (!result.ok) {
          process.stderr.write(`agents: no agent ${id}\n`);
          return 1;
        }
        process.stdout.write(`agents: ${id} revoked\n`);
        return 0;
      }
    }
  } finally {
    await database.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    const message = errorMessage(error);
    process.stderr.write(`agents: ${message}\n`);
    process.exit(
      error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS") ? 2 : 1,
    );
  },
);
