/**
 * `npm run enclave-policy -- revoke-operator-key KEY_ID` (docs/operations.md#revoking-an-operator-key):
 * a lost or stolen operator key file approves nothing from then on. Revoking only tightens, so it
 * takes the node's admin key (AGENT_ADMIN_AUTHORITY_KEY_FILE), not the policy key kept offline.
 */
import { parseArgs } from "node:util";
import { UsageError } from "./cli-shell.ts";

export type RevokeOperatorKeyCommand = { keyId: string; socket: string | undefined; json: boolean };

export function parseRevokeOperatorKeyArgs(argv: string[]): RevokeOperatorKeyCommand {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { socket: { type: "string" }, json: { type: "boolean" } },
  });
  if (positionals.length !== 2 || positionals[0] !== "revoke-operator-key") {
    throw new UsageError("expected: revoke-operator-key KEY_ID");
  }
  return { keyId: positionals[1]!, socket: values.socket, json: values.json ?? false };
}
