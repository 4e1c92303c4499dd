/**
 * `npm run enclave-policy -- show|apply|treasury|settler`: the operator's tool for the enclave's
 * sealed signing policy, faucet treasury and its payout terms, and x402 settler key. `apply`,
 * `treasury` and `settler` mint a policy-tier
 * capability from the policy authority key, which is kept offline with the operator and never on
 * the origin host (docs/enclave.md, "Keys and where production keeps them"); `show` needs no key. Env id and
 * chain id come from the enclave's get_policy, so the operator needs only the socket and the key. Prints
 * before and after. Exit codes: 0 ok, 1 refused by the enclave (or unreachable), 2 usage.
 */
import { readAuthoritySecret } from "../origin/signer/capability-minter.ts";
import { createSocketSignerClient } from "../origin/signer/socket-client.ts";
import type { GetPolicyResult, SignerClient } from "../origin/signer/types.ts";
import { errorMessage } from "../shared/error-message.ts";
import { applyPolicy, applySettler, applyTreasury, type PolicyAdminResult } from "./lib/policy-admin.ts";
import {
  POLICY_USAGE,
  type PolicyCommand,
  PolicyUsageError,
  parsePolicyArgs,
} from "./lib/policy-cli-args.ts";
import { changeJson, formatChange, formatShow, showJson } from "./lib/policy-format.ts";

const EXIT = { ok: 0, refused: 1, usage: 2 } as const;

async function main(): Promise<number> {
  let command: PolicyCommand;
  try {
    command = parsePolicyArgs(process.argv.slice(2), process.env);
  } catch (error) {
    if (!(error instanceof PolicyUsageError)) throw error;
    process.stderr.write(`enclave-policy: ${error.message}\n${POLICY_USAGE}\n`);
    return EXIT.usage;
  }
  const client = createSocketSignerClient({ socketPath: command.socketPath });
  try {
    return await run(command, client);
  } finally {
    await client.close();
  }
}

async function run(command: PolicyCommand, client: SignerClient): Promise<number> {
  if (command.command === "show") {
    const sealed = await client.getPolicy();
    if (!sealed.ok) return fail(EXIT.refused, `${sealed.error.code}: ${sealed.error.reason}`);
    write(command.json ? `${JSON.stringify(showJson(sealed.value), null, 2)}\n` : formatShow(sealed.value));
    return EXIT.ok;
  }
  let policySecret: Uint8Array;
  try {
    policySecret = await readAuthoritySecret(command.policyKeyFile);
  } catch (error) {
    // The path is the operator's own; the key's contents never appear in a message.
    const reason = error instanceof Error && "code" in error ? String(error.code) : "not a 32-byte hex seed";
    return fail(EXIT.usage, `cannot read --policy-key ${command.policyKeyFile} (${reason})`);
  }
  const result: PolicyAdminResult =
    command.command === "apply"
      ? await applyPolicy({ client, policySecret, changes: command.changes })
      : command.command === "settler"
        ? await applySettler({ client, policySecret, settlerKeyRef: command.settlerKeyRef })
        : await applyTreasury({
            client,
            policySecret,
            budgetUnits: command.budgetUnits,
            faucetKeyRef: command.faucetKeyRef,
            terms: command.terms,
          });
  if (!result.ok) {
    if (result.error.kind === "usage") return fail(EXIT.usage, result.error.message);
    return fail(EXIT.refused, `refused by the enclave: ${result.error.code} (${result.error.reason})`);
  }
  const { before, after } = result.value;
  const title =
    command.command === "apply"
      ? `policy applied, version ${before.policyVersion} -> ${after.policyVersion}`
      : command.command === "settler"
        ? settlerTitle(before, after)
        : "treasury configured (spent restarts at 0)";
  write(
    command.json
      ? `${JSON.stringify(changeJson(before, after), null, 2)}\n`
      : formatChange(title, before, after),
  );
  return EXIT.ok;
}

/** configure_settler is idempotent: a second run keeps the key it made, unless pointed at another. */
function settlerTitle(before: GetPolicyResult, after: GetPolicyResult): string {
  if (!before.settler) return "settler configured (fund its address with gas from the operator pool)";
  if (before.settler.settlerKeyRef === after.settler?.settlerKeyRef)
    return "settler already configured (kept; fund its address with gas)";
  return "settler pointed at another key (its address pays the gas of settlements from now on)";
}

function write(text: string): void {
  process.stdout.write(text);
}

function fail(code: number, message: string): number {
  process.stderr.write(`enclave-policy: ${message}\n`);
  return code;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`enclave-policy: ${errorMessage(error)}\n`);
    process.exit(1);
  },
);
