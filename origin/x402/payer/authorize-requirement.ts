/**
 * Which entry of a 402 quote the gateway may authorize
 * (docs/x402.md#an-agent-pays-with-its-token-authorize): an `exact` / `eip155:77` /
 * precompile-asset entry whose EIP-712 domain is the one the enclave signs under, for exactly
 * AGENT_X402_AMOUNT to AGENT_X402_PAY_TO, valid no longer than AGENT_X402_MAX_TIMEOUT_SECONDS.
 * Pure: the route turns a refusal into its 422.
 */
import { isChecksummedOrLowerAddress } from "../../../shared/address.ts";
import {
  CAIP2_NETWORK,
  EIP712_DOMAIN_NAME,
  EIP712_DOMAIN_VERSION,
  NATIVE_TRANSFER_AUTH_ADDRESS,
} from "../../../shared/constants.ts";
import type { X402PaymentRequired } from "../../../shared/gateway-schemas.ts";
import { err, ok, type Result } from "../../../shared/result.ts";
import { otherX402Version } from "../../../shared/x402-version.ts";

/** The node's x402 settings (config.x402 with the switch on: amount and payTo are required). */
export type X402AuthorizePolicy = {
  amountUnits: bigint;
  /** Lowercase. */
  payTo: string;
  maxTimeoutSeconds: number;
  /**
   * AGENT_X402_VALIDITY_MARGIN_SECONDS: an authorization with less validity than this left is
   * settled by no facilitator, and the enclave does not sign it.
   */
  validityMarginSeconds: number;
};

export type RequirementRefusalCode =
  | "x402_requirement_unsupported"
  | "x402_amount_not_allowed"
  | "x402_pay_to_not_allowed"
  | "x402_validity_too_long";

export type RequirementRefusal = { code: RequirementRefusalCode; message: string };

export type ChosenRequirement = {
  /** Index in `accepts`: the envelope's `accepted` is that entry as the agent sent it. */
  index: number;
  /** The amount string as quoted (it is the authorization's `value`). */
  amount: string;
  /** Lowercase. */
  payTo: `0x${string}`;
  /**
   * The payTo as the quote wrote it: addresses are copied as given
   * (docs/x402.md#an-agent-pays-with-its-token-authorize).
   */
  quotedPayTo: string;
  maxTimeoutSeconds: number;
};

export type ChooseRequirementResult = Result<ChosenRequirement, RequirementRefusal>;

/**
 * The first entry the node can pay; when every payable-looking entry is refused, the first one's
 * refusal (so the agent learns which setting its quote disagrees with).
 */
export function chooseRequirement(
  quote: X402PaymentRequired,
  policy: X402AuthorizePolicy,
): ChooseRequirementResult {
  const version = versionRefusal(quote);
  if (version) return err(version);
  let firstRefusal: RequirementRefusal | undefined;
  for (const [index, entry] of quote.accepts.entries()) {
    if (!isOurScheme(entry)) continue;
    const checked = checkEntry(entry, policy);
    if ("code" in checked) {
      firstRefusal ??= checked;
      continue;
    }
    return ok({ index, ...checked });
  }
  return err(firstRefusal ?? unsupported());
}

/** A quote of another x402 version: this gateway authorizes version 2 only. */
export function versionRefusal(
  quote: Pick<X402PaymentRequired, "x402Version">,
): RequirementRefusal | undefined {
  return quote.x402Version === 2
    ? undefined
    : unsupported(`this gateway authorizes x402 version 2 quotes, not version ${quote.x402Version}`);
}

/**
 * The version refusal of a request's `payment_required` as it was sent, before its shape is judged
 * (shared/x402-version.ts). Undefined when it names version 2, or no whole-number version.
 */
export function sentVersionRefusal(raw: unknown): RequirementRefusal | undefined {
  const version = otherX402Version((raw as { payment_required?: unknown } | null)?.payment_required);
  return version === undefined ? undefined : versionRefusal({ x402Version: version });
}

/**
 * exact / eip155:77 / the precompile, paid by an EIP-3009 authorization under the domain the
 * enclave signs with (an entry naming another domain would get a signature its verifier rejects).
 */
export function isOurScheme(entry: Record<string, unknown>): boolean {
  const extra = (typeof entry.extra === "object" && entry.extra !== null ? entry.extra : {}) as Record<
    string,
    unknown
  >;
  return (
    entry.scheme === "exact" &&
    entry.network === CAIP2_NETWORK &&
    typeof entry.asset === "string" &&
    entry.asset.toLowerCase() === NATIVE_TRANSFER_AUTH_ADDRESS &&
    (extra.assetTransferMethod === undefined || extra.assetTransferMethod === "eip3009") &&
    extra.name === EIP712_DOMAIN_NAME &&
    extra.version === EIP712_DOMAIN_VERSION
  );
}

function checkEntry(
  entry: Record<string, unknown>,
  policy: X402AuthorizePolicy,
): Omit<ChosenRequirement, "index"> | RequirementRefusal {
  const allowed = policy.amountUnits.toString();
  if (entry.amount !== allowed) {
    return {
      code: "x402_amount_not_allowed",
      message: `this node authorizes exactly ${allowed} units per payment (AGENT_X402_AMOUNT); the quote asks for ${describeQuoted(entry.amount)}`,
    };
  }
  const payTo = quotedAddress(entry.payTo);
  if (payTo !== policy.payTo) {
    return (
      checksumRefusal(entry.payTo) ?? {
        code: "x402_pay_to_not_allowed",
        message: `this node authorizes payments to ${policy.payTo} only (AGENT_X402_PAY_TO); the quote pays ${describeQuoted(entry.payTo)}`,
      }
    );
  }
  const timeout = checkTimeout(entry, policy);
  if (typeof timeout !== "number") return timeout;
  return {
    amount: allowed,
    payTo,
    quotedPayTo: entry.payTo as string,
    maxTimeoutSeconds: timeout,
  };
}

/**
 * A quoted address, lowercase, when it is one this service takes anywhere: 20-byte hex, all lower
 * case or its EIP-55 checksum (shared/address.ts). Mixed case that is not its checksum is how a
 * mistyped address shows, and the official client's getAddress refuses to pay it.
 */
export function quotedAddress(value: unknown): `0x${string}` | undefined {
  return typeof value === "string" && isChecksummedOrLowerAddress(value)
    ? (value.toLowerCase() as `0x${string}`)
    : undefined;
}

/** A payTo refused for its letter case alone, said as such (a message naming the allowed payee would puzzle). */
export function checksumRefusal(quoted: unknown): RequirementRefusal | undefined {
  if (typeof quoted !== "string" || !/^0x[0-9a-fA-F]{40}$/.test(quoted) || quotedAddress(quoted))
    return undefined;
  return {
    code: "x402_pay_to_not_allowed",
    message: `the quote pays ${quoted}, whose mixed case is not its EIP-55 checksum, as a mistyped address's is not; nothing is signed for it`,
  };
}

/** The entry's validity in seconds, or why this node will not sign for it that long. */
export function checkTimeout(
  entry: Record<string, unknown>,
  policy: Pick<X402AuthorizePolicy, "maxTimeoutSeconds" | "validityMarginSeconds">,
): number | RequirementRefusal {
  const timeout = entry.maxTimeoutSeconds;
  if (typeof timeout !== "number" || !Number.isSafeInteger(timeout) || timeout < 1) {
    return unsupported("maxTimeoutSeconds must be a positive whole number of seconds");
  }
  // A facilitator settles an authorization only while more than the margin of it is left
  // (settle-window.ts): one valid the margin itself never has that. The enclave, which signs by the
  // margin on its own clock, signed it or refused it (x402_validity_too_long) by whether its clock
  // had turned the second since ours. Refused here, for what it is.
  if (timeout <= policy.validityMarginSeconds) {
    return unsupported(
      `the quote asks for an authorization valid ${timeout} s; this node signs only for longer than ${policy.validityMarginSeconds} s (AGENT_X402_VALIDITY_MARGIN_SECONDS): no facilitator settles one with no more than that left, as one valid ${timeout} s has from the moment it is signed`,
    );
  }
  if (timeout > policy.maxTimeoutSeconds) {
    return {
      code: "x402_validity_too_long",
      message: `the quote asks for an authorization valid ${timeout} s; this node signs at most ${policy.maxTimeoutSeconds} s (AGENT_X402_MAX_TIMEOUT_SECONDS)`,
    };
  }
  return timeout;
}

/** x402_requirement_unsupported; by default, that no entry is of the one scheme this node pays. */
export function unsupported(
  message = `no entry of accepts is scheme "exact" on ${CAIP2_NETWORK} in the native asset ${NATIVE_TRANSFER_AUTH_ADDRESS} by EIP-3009 authorization (EIP-712 domain "${EIP712_DOMAIN_NAME}" version "${EIP712_DOMAIN_VERSION}")`,
): RequirementRefusal {
  return { code: "x402_requirement_unsupported", message };
}

/**
 * A quoted value for an error message: short, and never more than the quote's own field. A value
 * that is not a string says so: x402 writes amounts and addresses as strings, and the number 10000
 * quoted bare would read as the very amount the message says is allowed.
 */
export function describeQuoted(value: unknown): string {
  if (value === undefined) return "nothing";
  const text = typeof value === "string" ? value : JSON.stringify(value);
  const short = text.length > 80 ? `${text.slice(0, 80)}…` : text;
  if (typeof value === "string") return short;
  const kind = value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`;
  return `${short} (${kind.replace(/^a (?=[aeiou])/, "an ")}, not a string)`;
}
