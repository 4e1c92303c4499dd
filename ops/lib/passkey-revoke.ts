/**
 * `npm run enclave-policy -- revoke-passkey KEY_ID --reason TEXT` (docs/operations.md#revoking-a-passkey):
 * revokes a lost or stolen passkey from the node, as the console's Revoke button does, through the
 * same code (origin/passkeys/revoke.ts). Revoking only tightens, so it takes the node's admin key
 * (AGENT_ADMIN_AUTHORITY_KEY_FILE, as `npm run policy` does), not the policy key kept offline.
 */
import { parseArgs } from "node:util";
import { UsageError } from "./cli-shell.ts";

export type RevokePasskeyCommand = {
  keyId: string;
  reason: string;
  socket: string | undefined;
  json: boolean;
};

export function parseRevokePasskeyArgs(argv: string[]): RevokePasskeyCommand {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      reason: { type: "string" },
      socket: { type: "string" },
      json: { type: "boolean" },
    },
  });
  if (positionals.length !== 2 || positionals[0] !== "revoke-passkey") {
    throw new UsageError("expected: revoke-passkey KEY_ID --reason TEXT");
  }
  const reason = values.reason?.trim();
  if (!reason) throw new UsageError("revoke-passkey needs --reason TEXT (the audit shows it)");
  return { keyId: positionals[1]!, reason, socket: values.socket, json: values.json ?? false };
}
