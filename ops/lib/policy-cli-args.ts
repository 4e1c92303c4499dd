/**
 * Arguments of `npm run enclave-policy` (ops/enclave-policy.ts). Amounts are decimal strings
 * of 6-decimal units, the fee ceiling is wei; everything is parsed here, once, into bigint and
 * lowercase addresses, so the rest of the tool trusts its input.
 */
import { parseArgs } from "node:util";
import type { Address } from "viem";
import { socketPathOfEndpoint } from "../../origin/signer/endpoint.ts";
import {
  addressSchema,
  keyRefSchema,
  MAX_FAUCET_COOLDOWN_MS,
  uintStringSchema,
} from "../../shared/enclave-ops.ts";
import { errorMessage } from "../../shared/error-message.ts";
import { UsageError } from "./cli-shell.ts";
import type { FaucetTermsChanges, PolicyChanges } from "./policy-admin.ts";

/** The local stack's socket (dev/start.ts), when neither --socket nor the endpoint is set. */
export const DEFAULT_POLICY_SOCKET = ".data/enclave.sock";

export const POLICY_USAGE = `usage:
  npm run enclave-policy -- show [--json]
  npm run enclave-policy -- apply --policy-key FILE [--per-tx UNITS] [--daily UNITS] [--fee-ceiling WEI]
      [--allowlist ADDR,ADDR|none] [--x402-amount UNITS|none] [--x402-pay-to ADDR]
      [--max-validity SECONDS] [--x402-margin SECONDS] [--x402-daily COUNT] [--settler-daily UNITS]
      [--x402-max-per-payment UNITS|none] [--x402-payees any|ADDR,ADDR] [--operator-pool ADDR] [--json]
  npm run enclave-policy -- treasury --policy-key FILE --budget UNITS [--payout UNITS] [--cooldown-ms MS]
      [--payout-daily UNITS] [--faucet-key-ref REF] [--json]
  npm run enclave-policy -- settler --policy-key FILE [--settler-key-ref REF] [--json]
  npm run enclave-policy -- payee --policy-key FILE [--payee-key-ref REF] [--json]
  npm run enclave-policy -- enroll-passkey CREDENTIAL_ID|KEY_ID --policy-key FILE [--json]
  npm run enclave-policy -- revoke-passkey KEY_ID --reason TEXT [--json]
  npm run enclave-policy -- revoke-operator-key KEY_ID [--json]
revoke-passkey and revoke-operator-key take the node's admin key (AGENT_ADMIN_AUTHORITY_KEY_FILE),
not the policy key: revoking only tightens.
Every command takes --socket PATH (default: AGENT_SIGNER_SVC_HSM_ENDPOINT, else ${DEFAULT_POLICY_SOCKET}).
apply keeps every field the flags do not name; the first apply names them all. treasury keeps the
payout terms it does not name (a first treasury names them all); --payout-daily is per recipient
per UTC day, at least --payout. --x402-margin is whole seconds an x402 authorization must be valid on each side of
the enclave's clock to be settled; --x402-daily is authorizations per key per UTC day;
--settler-daily is units of fee the x402 settler may commit per UTC day (settlements and fillers);
--x402-max-per-payment seals the node's x402 ceiling beside the x402 pair: any payment up to it, to
the payees of --x402-payees (any: every payee), may be signed (none: the pair alone).
Units are 6-decimal USDC units (1 USDC = 1000000); --fee-ceiling is gas limit x max fee per gas, in wei.
Exit: 0 applied or shown, 1 refused by the enclave, 2 usage, 3 the enclave unreachable (or another error).`;

export type PolicyCommand =
  | { command: "show"; socketPath: string; json: boolean }
  | { command: "apply"; socketPath: string; json: boolean; policyKeyFile: string; changes: PolicyChanges }
  | {
      command: "treasury";
      socketPath: string;
      json: boolean;
      policyKeyFile: string;
      budgetUnits: bigint;
      faucetKeyRef: string | undefined;
      terms: FaucetTermsChanges;
    }
  | {
      command: "settler";
      socketPath: string;
      json: boolean;
      policyKeyFile: string;
      settlerKeyRef: string | undefined;
    }
  | {
      command: "payee";
      socketPath: string;
      json: boolean;
      policyKeyFile: string;
      payeeKeyRef: string | undefined;
    };

/** Thrown with a message fit for the terminal: a usage error of the CLI shell. */
export class PolicyUsageError extends UsageError {
  override readonly name: string = "PolicyUsageError";
}

/** Parses argv (without node and script) and the environment. */
export function parsePolicyArgs(argv: string[], env: Record<string, string | undefined>): PolicyCommand {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    throw new PolicyUsageError(errorMessage(error));
  }
  const { values, positionals } = parsed;
  const command = positionals[0];
  if (positionals.length !== 1 || !isCommand(command)) {
    throw new PolicyUsageError(
      "expected one command: show, apply, treasury, settler, payee, enroll-passkey, revoke-passkey or revoke-operator-key",
    );
  }
  const socketPath = enclaveSocketPath(values.socket, env.AGENT_SIGNER_SVC_HSM_ENDPOINT);
  const json = values.json ?? false;
  const policyFlags = [
    "per-tx",
    "daily",
    "fee-ceiling",
    "allowlist",
    "x402-amount",
    "x402-pay-to",
    "max-validity",
    "x402-margin",
    "x402-daily",
    "settler-daily",
    "x402-max-per-payment",
    "x402-payees",
    "operator-pool",
  ] as const;
  const treasuryFlags = ["budget", "faucet-key-ref", "payout", "cooldown-ms", "payout-daily"] as const;
  const used = (names: readonly string[]): string[] =>
    names.filter((name) => values[name as keyof typeof values] !== undefined).map((name) => `--${name}`);

  if (command === "show") {
    const extra = used([...policyFlags, ...treasuryFlags, "policy-key", "settler-key-ref", "payee-key-ref"]);
    if (extra.length > 0) throw new PolicyUsageError(`show takes no ${extra.join(", ")}`);
    return { command, socketPath, json };
  }
  const policyKeyFile = values["policy-key"];
  if (!policyKeyFile) throw new PolicyUsageError(`${command} needs --policy-key FILE`);
  if (command === "payee") {
    // configure_payee keeps the payee key init made, unless pointed at a named (restored) one.
    const extra = used([...policyFlags, ...treasuryFlags, "settler-key-ref"]);
    if (extra.length > 0) throw new PolicyUsageError(`payee takes no ${extra.join(", ")}`);
    return {
      command,
      socketPath,
      json,
      policyKeyFile,
      payeeKeyRef: keyRef(values["payee-key-ref"], "--payee-key-ref"),
    };
  }
  if (command === "settler") {
    // configure_settler makes the settler key once and keeps it, unless pointed at a named key.
    const extra = used([...policyFlags, ...treasuryFlags, "payee-key-ref"]);
    if (extra.length > 0) throw new PolicyUsageError(`settler takes no ${extra.join(", ")}`);
    return {
      command,
      socketPath,
      json,
      policyKeyFile,
      settlerKeyRef: keyRef(values["settler-key-ref"], "--settler-key-ref"),
    };
  }
  if (command === "treasury") {
    const extra = used([...policyFlags, "settler-key-ref", "payee-key-ref"]);
    if (extra.length > 0) throw new PolicyUsageError(`treasury takes no ${extra.join(", ")}`);
    if (values.budget === undefined) throw new PolicyUsageError("treasury needs --budget UNITS");
    const terms: FaucetTermsChanges = {};
    if (values.payout !== undefined) terms.payoutUnits = amount(values.payout, "--payout");
    if (values["cooldown-ms"] !== undefined) terms.cooldownMs = cooldown(values["cooldown-ms"]);
    if (values["payout-daily"] !== undefined)
      terms.dailyLimitUnits = amount(values["payout-daily"], "--payout-daily");
    return {
      command,
      socketPath,
      json,
      policyKeyFile,
      budgetUnits: amount(values.budget, "--budget"),
      faucetKeyRef: keyRef(values["faucet-key-ref"], "--faucet-key-ref"),
      terms,
    };
  }
  const extra = used([...treasuryFlags, "settler-key-ref", "payee-key-ref"]);
  if (extra.length > 0) throw new PolicyUsageError(`apply takes no ${extra.join(", ")}`);
  const changes: PolicyChanges = {};
  if (values["per-tx"] !== undefined) changes.perTxLimitUnits = amount(values["per-tx"], "--per-tx");
  if (values.daily !== undefined) changes.dailyLimitUnits = amount(values.daily, "--daily");
  if (values["fee-ceiling"] !== undefined)
    changes.feeCeilingWei = amount(values["fee-ceiling"], "--fee-ceiling");
  if (values.allowlist !== undefined) changes.recipientAllowlist = allowlist(values.allowlist);
  if (values["x402-amount"] !== undefined) {
    const text = values["x402-amount"];
    changes.x402AmountUnits = text === "none" ? null : amount(text, "--x402-amount");
  }
  if (values["x402-pay-to"] !== undefined)
    changes.x402PayTo = address(values["x402-pay-to"], "--x402-pay-to");
  if (values["max-validity"] !== undefined) changes.x402MaxTimeoutSeconds = seconds(values["max-validity"]);
  if (values["x402-margin"] !== undefined)
    changes.x402ValidityMarginSeconds = integer(values["x402-margin"], "--x402-margin", 600);
  if (values["x402-daily"] !== undefined)
    changes.x402DailyLimit = integer(values["x402-daily"], "--x402-daily", Number.MAX_SAFE_INTEGER);
  if (values["settler-daily"] !== undefined)
    changes.settlerDailyFeeUnits = amount(values["settler-daily"], "--settler-daily");
  if (values["x402-max-per-payment"] !== undefined) {
    const text = values["x402-max-per-payment"];
    changes.x402MaxPerPaymentUnits = text === "none" ? null : amount(text, "--x402-max-per-payment");
  }
  if (values["x402-payees"] !== undefined) {
    const text = values["x402-payees"];
    changes.x402Payees =
      text === "any" ? null : text.split(",").map((item) => address(item.trim(), "--x402-payees"));
  }
  if (values["operator-pool"] !== undefined)
    changes.operatorPool = address(values["operator-pool"], "--operator-pool");
  if (Object.keys(changes).length === 0) throw new PolicyUsageError("apply needs at least one field to set");
  return { command, socketPath, json, policyKeyFile, changes };
}

function isCommand(value: string | undefined): value is PolicyCommand["command"] {
  return (
    value === "show" || value === "apply" || value === "treasury" || value === "settler" || value === "payee"
  );
}

function parse(argv: string[]) {
  return parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      socket: { type: "string" },
      json: { type: "boolean" },
      "policy-key": { type: "string" },
      "per-tx": { type: "string" },
      daily: { type: "string" },
      "fee-ceiling": { type: "string" },
      allowlist: { type: "string" },
      "x402-amount": { type: "string" },
      "x402-pay-to": { type: "string" },
      "max-validity": { type: "string" },
      "x402-margin": { type: "string" },
      "x402-daily": { type: "string" },
      "settler-daily": { type: "string" },
      "x402-max-per-payment": { type: "string" },
      "x402-payees": { type: "string" },
      "operator-pool": { type: "string" },
      budget: { type: "string" },
      "faucet-key-ref": { type: "string" },
      payout: { type: "string" },
      "cooldown-ms": { type: "string" },
      "payout-daily": { type: "string" },
      "settler-key-ref": { type: "string" },
      "payee-key-ref": { type: "string" },
    },
  });
}

/**
 * `--socket ""` (`--socket "$SOCK"` with the variable unset) is a missing value, not the default:
 * passed over, the tool would ask the node's own enclave, or the local stack's, instead.
 */
export function checkSocketFlag(flag: string | undefined): void {
  if (flag !== undefined && flag.trim() === "") throw new PolicyUsageError("--socket needs a path");
}

/** The enclave's socket: --socket, else the node's endpoint, else the local stack's (both policy tools). */
export function enclaveSocketPath(flag: string | undefined, endpoint: string | undefined): string {
  checkSocketFlag(flag);
  if (flag) return flag;
  if (!endpoint) return DEFAULT_POLICY_SOCKET;
  try {
    return socketPathOfEndpoint(endpoint);
  } catch (error) {
    throw new PolicyUsageError(errorMessage(error));
  }
}

function amount(text: string, flag: string): bigint {
  if (!uintStringSchema.safeParse(text).success) {
    throw new PolicyUsageError(`${flag} must be a whole number without sign, fraction or exponent`);
  }
  return BigInt(text);
}

function address(text: string, flag: string): Address {
  if (!addressSchema.safeParse(text).success)
    throw new PolicyUsageError(`${flag} must be a 20-byte hex address`);
  return text.toLowerCase() as Address;
}

function allowlist(text: string): Address[] | null {
  if (text === "none") return null;
  const items = text.split(",").map((item) => item.trim());
  return items.map((item) => address(item, "--allowlist"));
}

function keyRef(text: string | undefined, flag: string): string | undefined {
  if (text !== undefined && !keyRefSchema.safeParse(text).success) {
    throw new PolicyUsageError(`${flag} must be a key_ref (64 hex digits)`);
  }
  return text;
}

/** A whole number from 0 to `max`, no sign, fraction or exponent. */
function integer(text: string, flag: string, max: number): number {
  if (!/^(0|[1-9][0-9]*)$/.test(text) || Number(text) > max) {
    throw new PolicyUsageError(`${flag} must be a whole number from 0 to ${max}`);
  }
  return Number(text);
}

function cooldown(text: string): number {
  return integer(text, "--cooldown-ms", MAX_FAUCET_COOLDOWN_MS);
}

function seconds(text: string): number {
  const value = Number(text);
  if (!/^[1-9][0-9]*$/.test(text) || value > 86_400) {
    throw new PolicyUsageError("--max-validity must be whole seconds from 1 to 86400");
  }
  return value;
}
