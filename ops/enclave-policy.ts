/**
 * `npm run enclave-policy -- show|apply|treasury|settler|payee`: the operator's tool for the enclave's
 * sealed signing policy, faucet treasury and its payout terms, x402 settler key and x402 payee key,
 * and for operators' passkeys (`enroll-passkey` with the policy key, `revoke-passkey` with the node's
 * admin key: revoking only tightens) and operator keys (`revoke-operator-key`, with the admin key too).
 * `apply`, `treasury`, `settler` and `payee` mint a policy-tier
 * capability from the policy authority key, which is kept offline with the operator and never on
 * the origin host (docs/enclave.md, "Keys and where production keeps them"); `show` needs no key. Env id and
 * chain id come from the enclave's get_policy, so the operator needs only the socket and the key. Prints
 * before and after. Exit codes: docs/operations.md#exit-codes-of-the-operator-tools (refused: by the
 * enclave; error: the enclave could not be reached).
 */
import { openDatabase } from "../origin/db/open.ts";
import { passkeyFingerprint } from "../origin/passkeys/credential-key.ts";
import { revokePasskey } from "../origin/passkeys/revoke.ts";
import { findPasskey } from "../origin/passkeys/store.ts";
import { readAuthoritySecret } from "../origin/signer/capability-minter.ts";
import type { GetPolicyResult, SignerClient, SignerFailure } from "../origin/signer/types.ts";
import { readAdminKey } from "./lib/admin-key.ts";
import {
  type CliContext,
  type CliOutcome,
  DONE,
  errored,
  readArgumentFile,
  refused,
  runCli,
  UsageError,
} from "./lib/cli-shell.ts";
import { enclaveUnreachable, operatorSignerClient } from "./lib/enclave-unreachable.ts";
import { nodeConfig } from "./lib/node-config.ts";
import { parseRevokeOperatorKeyArgs } from "./lib/operator-key-revoke.ts";
import { describePasskey, enrollPendingPasskey, parseEnrollPasskeyArgs } from "./lib/passkey-enroll.ts";
import { parseRevokePasskeyArgs } from "./lib/passkey-revoke.ts";
import {
  applyPayee,
  applyPolicy,
  applySettler,
  applyTreasury,
  type PolicyAdminResult,
} from "./lib/policy-admin.ts";
import {
  enclaveSocketPath,
  POLICY_USAGE,
  type PolicyCommand,
  parsePolicyArgs,
} from "./lib/policy-cli-args.ts";
import { changeJson, formatChange, formatShow, showJson } from "./lib/policy-format.ts";
import { minterFor } from "./lib/policy-operator.ts";

async function run(argv: string[], { env }: CliContext): Promise<CliOutcome> {
  if (argv[0] === "enroll-passkey") return enrollPasskey(argv, env);
  if (argv[0] === "revoke-passkey") return revokePasskeyCommand(argv, env);
  if (argv[0] === "revoke-operator-key") return revokeOperatorKeyCommand(argv, env);
  const command = parsePolicyArgs(argv, env);
  const client = operatorSignerClient(command.socketPath);
  try {
    return await runCommand(command, client);
  } finally {
    await client.close();
  }
}

async function runCommand(command: PolicyCommand, client: SignerClient): Promise<CliOutcome> {
  if (command.command === "show") {
    const sealed = await client.getPolicy();
    if (!sealed.ok) {
      const message = `${sealed.error.code}: ${sealed.error.reason}`;
      return enclaveUnreachable(sealed.error) ? errored(message) : refused(message);
    }
    write(command.json ? `${JSON.stringify(showJson(sealed.value), null, 2)}\n` : formatShow(sealed.value));
    return DONE;
  }
  // The path is the operator's own; the key's contents never appear in a message.
  const policySecret = await readArgumentFile(
    "--policy-key",
    command.policyKeyFile,
    "a 32-byte hex seed",
    readAuthoritySecret,
  );
  const result: PolicyAdminResult =
    command.command === "apply"
      ? await applyPolicy({ client, policySecret, changes: command.changes })
      : command.command === "settler"
        ? await applySettler({ client, policySecret, settlerKeyRef: command.settlerKeyRef })
        : command.command === "payee"
          ? await applyPayee({ client, policySecret, payeeKeyRef: command.payeeKeyRef })
          : await applyTreasury({
              client,
              policySecret,
              budgetUnits: command.budgetUnits,
              faucetKeyRef: command.faucetKeyRef,
              terms: command.terms,
            });
  if (!result.ok) {
    switch (result.error.code) {
      case "usage":
        throw new UsageError(result.error.message);
      case "refused":
        return refused(
          `refused by the enclave: ${result.error.failure.code} (${result.error.failure.reason})`,
        );
      case "unreachable":
        return errored(
          `no answer from the enclave: ${result.error.failure.code} (${result.error.failure.reason})`,
        );
    }
  }
  const { before, after } = result.value;
  const title =
    command.command === "apply"
      ? `policy applied, version ${before.policyVersion} -> ${after.policyVersion}`
      : command.command === "settler"
        ? settlerTitle(before, after)
        : command.command === "payee"
          ? `payee ${after.payee?.payeeAddress} (signs the demo's offers and receipts; seal it as --x402-pay-to)`
          : "treasury configured (spent restarts at 0)";
  write(
    command.json
      ? `${JSON.stringify(changeJson(before, after), null, 2)}\n`
      : formatChange(title, before, after),
  );
  return DONE;
}

/** configure_settler is idempotent: a second run keeps the key it made, unless pointed at another. */
function settlerTitle(before: GetPolicyResult, after: GetPolicyResult): string {
  if (!before.settler) return "settler configured (fund its address with gas from the operator pool)";
  if (before.settler.settlerKeyRef === after.settler?.settlerKeyRef)
    return "settler already configured (kept; fund its address with gas)";
  return "settler pointed at another key (its address pays the gas of settlements from now on)";
}

/** enroll-passkey: a credential registered in the console, sealed with the policy key. */
async function enrollPasskey(argv: string[], env: Record<string, string | undefined>): Promise<CliOutcome> {
  const command = parseEnrollPasskeyArgs(argv);
  const policySecret = await readArgumentFile(
    "--policy-key",
    command.policyKeyFile,
    "a 32-byte hex seed",
    readAuthoritySecret,
  );
  const config = nodeConfig(env);
  const client = operatorSignerClient(enclaveSocketPath(command.socket, config.signer.endpoint));
  const database = await openDatabase(config, 1);
  try {
    const enrolled = await enrollPendingPasskey({
      db: database.db,
      client,
      policySecret,
      id: command.id,
      announce: (passkey) => {
        if (!command.json) write(describePasskey(passkey));
      },
    });
    if (!enrolled.ok) {
      if (enrolled.error.code !== "signer") return refused(enrolled.error.message);
      const { failure } = enrolled.error;
      const message = `${failure.code} (${failure.reason})`;
      return enclaveUnreachable(failure)
        ? errored(`no answer from the enclave: ${message}`)
        : refused(`refused by the enclave: ${message}`);
    }
    const passkey = enrolled.value;
    write(
      command.json
        ? `${JSON.stringify({ key_id: passkey.keyId, operator: passkey.operator, credential_id: passkey.credentialId, rp_id: passkey.rpId, origin: passkey.origin, fingerprint: passkeyFingerprint(passkey.publicKey), enrolled: true })}\n`
        : `passkey ${passkey.keyId} enrolled: ${passkey.operator} may now approve with it\n`,
    );
    return DONE;
  } finally {
    await database.close();
    await client.close();
  }
}

/** revoke-passkey: a lost or stolen passkey revoked with the node's admin key, as the console does. */
async function revokePasskeyCommand(
  argv: string[],
  env: Record<string, string | undefined>,
): Promise<CliOutcome> {
  const command = parseRevokePasskeyArgs(argv);
  const config = nodeConfig(env);
  const adminSecret = await readAdminKey(config);
  const client = operatorSignerClient(enclaveSocketPath(command.socket, config.signer.endpoint));
  const database = await openDatabase(config, 1);
  try {
    const identity = await client.getSealedIdentity();
    if (!identity.ok) return signerRefusal(identity.error);
    const before = await findPasskey(database.db, command.keyId);
    const revoked = await revokePasskey(
      {
        db: database.db,
        enclave: {
          signer: client,
          authorize: minterFor(client, identity.value, adminSecret, "revoke-passkey"),
        },
      },
      { keyId: command.keyId, revocation: { reason: command.reason, source: "cli", by: null } },
    );
    if (!revoked.ok) {
      if (revoked.error.code !== "signer") return refused(revoked.error.message);
      return signerRefusal(revoked.error.failure);
    }
    const passkey = revoked.value;
    const already = before?.revokedAt != null;
    write(
      command.json
        ? `${JSON.stringify({ key_id: passkey.keyId, operator: passkey.operator, credential_id: passkey.credentialId, revoked_at: passkey.revokedAt?.toISOString() ?? null, revoked_reason: passkey.revokedReason })}\n`
        : already
          ? `passkey ${passkey.keyId} of ${passkey.operator} was revoked already, at ${passkey.revokedAt?.toISOString()} (${passkey.revokedReason}): nothing changed\n`
          : `passkey ${passkey.keyId} of ${passkey.operator} revoked: it approves nothing, signs no one in, its sessions end, and it is never enrolled again\n`,
    );
    return DONE;
  } finally {
    await database.close();
    await client.close();
  }
}

/**
 * revoke-operator-key: a lost or stolen operator key file revoked with the node's admin key. Its key
 * id and public key are never enrolled again; the enclave answers a repeat as its first revoke.
 */
async function revokeOperatorKeyCommand(
  argv: string[],
  env: Record<string, string | undefined>,
): Promise<CliOutcome> {
  const command = parseRevokeOperatorKeyArgs(argv);
  const config = nodeConfig(env);
  const adminSecret = await readAdminKey(config);
  const client = operatorSignerClient(enclaveSocketPath(command.socket, config.signer.endpoint));
  try {
    const identity = await client.getSealedIdentity();
    if (!identity.ok) return signerRefusal(identity.error);
    const revoked = await client.revokeOperatorKey(
      { keyId: command.keyId },
      minterFor(client, identity.value, adminSecret, "revoke-operator-key"),
    );
    if (!revoked.ok) return signerRefusal(revoked.error);
    const { keyId, publicKey, revokedAt } = revoked.value;
    write(
      command.json
        ? `${JSON.stringify({ key_id: keyId, public_key: publicKey, revoked_at: revokedAt.toISOString() })}\n`
        : `operator key ${keyId} revoked (since ${revokedAt.toISOString()}): it approves nothing, and neither its id nor its public key is enrolled again\n`,
    );
    return DONE;
  } finally {
    await client.close();
  }
}

function signerRefusal(failure: SignerFailure): CliOutcome {
  const message = `${failure.code} (${failure.reason})`;
  return enclaveUnreachable(failure)
    ? errored(`no answer from the enclave: ${message}`)
    : refused(`refused by the enclave: ${message}`);
}

function write(text: string): void {
  process.stdout.write(text);
}

runCli({ name: "enclave-policy", usage: POLICY_USAGE, run });
