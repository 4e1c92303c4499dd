import * as z from "zod";
import { isChecksummedOrLowerAddress } from "../shared/address.ts";
import { DEFAULT_BASE_PATH } from "../shared/constants.ts";
import { isHttpUrl } from "../shared/http-url.ts";
import { err, ok, type Result } from "../shared/result.ts";
import { STATEMENT_WAIT_MS, TRANSACTION_IDLE_MS } from "./db/client.ts";
import { RPC_ANSWER_DEADLINE_MS } from "./gateway/limits.ts";
import { parseCidrList } from "./http/cidr.ts";
import { SIGNER_REQUEST_TIMEOUT_MS } from "./signer/socket-client.ts";
import { JITTER_FRACTION, MAX_RETRY_AFTER_SECONDS } from "./webhooks/retry-delay.ts";

/**
 * The x402 demo quote's maxTimeoutSeconds (docs/api.md#the-demo-quotes-amount; x402/payee/requirements.ts
 * quotes it); here because the validity margin is checked against it.
 */
export const DEMO_MAX_TIMEOUT_SECONDS = 60;

/**
 * What the demo quote asks for on a node whose longest validity is `maxTimeoutSeconds`: a client
 * signs validBefore = now + the quote's figure, which the enclave refuses past its sealed bound.
 */
export const demoMaxTimeoutSeconds = (maxTimeoutSeconds: number): number =>
  Math.min(DEMO_MAX_TIMEOUT_SECONDS, maxTimeoutSeconds);

/**
 * The origin's configuration: every variable of docs/configuration.md#variables.
 * Parsed once at start (parsed once at the boundary, trusted after); only main.ts and the scripts read
 * process.env and hand it here.
 */

/**
 * How long `@x402/core`'s HTTPFacilitatorClient waits for a settle answer by default: the
 * facilitator's own wait for a receipt must end before it.
 */
export const X402_CLIENT_TIMEOUT_MS = 90_000;

/**
 * What a settle takes beyond its receipt wait: a presentation of a payment another one holds waits
 * 5 s longer than the receipt wait (x402/payee/earlier-presentation.ts HOLD_BEYOND_RECEIPT_MS),
 * and a settle claims, reads the chain, signs and broadcasts before its wait begins.
 */
export const X402_SETTLE_BEYOND_RECEIPT_MS = 10_000;

/**
 * The longest AGENT_X402_RECEIPT_TIMEOUT_MS start-up accepts: every settle, a repeated presentation
 * included, then answers before the official client gives up on it.
 */
export const X402_RECEIPT_TIMEOUT_MAX_MS = X402_CLIENT_TIMEOUT_MS - X402_SETTLE_BEYOND_RECEIPT_MS;

/** Only the literal `true` enables (docs/configuration.md#variables): no switch is on by accident. */
const literalTrue = z
  .string()
  .optional()
  .transform((value) => value === "true");

const units = (fallback: bigint) =>
  z
    .string()
    .regex(/^\d{1,30}$/, "must be a whole number of 6-decimal units")
    .optional()
    .transform((value) => (value === undefined ? fallback : BigInt(value)));

const optionalUnits = z
  .string()
  .regex(/^\d{1,30}$/, "must be a whole number of 6-decimal units")
  .optional()
  .transform((value) => (value === undefined ? undefined : BigInt(value)));

const integer = (fallback: number, min: number, max: number) =>
  z
    .string()
    .regex(/^\d+$/, "must be a whole number")
    .optional()
    .transform((value) => (value === undefined ? fallback : Number(value)))
    .pipe(z.number().int().min(min, `must be at least ${min}`).max(max, `must be at most ${max}`));

/** Secrets are at least 32 bytes, not characters (docs/configuration.md#variables). */
const MIN_SECRET_BYTES = 32;
const secret = z
  .string()
  .optional()
  .refine(
    (value) => value === undefined || new TextEncoder().encode(value).length >= MIN_SECRET_BYTES,
    `must be at least ${MIN_SECRET_BYTES} bytes`,
  );

/**
 * The Standard Webhooks schedule: at once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h after
 * each failed attempt (docs/operations.md#webhooks).
 */
export const STANDARD_WEBHOOK_RETRY_SECONDS: readonly number[] = [
  0, 5, 300, 1_800, 7_200, 18_000, 36_000, 36_000,
];

/** A comma list of 1 to 20 whole seconds, each at most a week. */
const retrySchedule = z
  .string()
  .optional()
  .transform((value, ctx) => {
    if (value === undefined) return [...STANDARD_WEBHOOK_RETRY_SECONDS];
    const parts = value.split(",").map((part) => part.trim());
    if (parts.length > 20 || parts.some((part) => !/^\d{1,6}$/.test(part) || Number(part) > 604_800)) {
      ctx.addIssue({
        code: "custom",
        message: "must be a comma list of 1 to 20 whole seconds, each at most 604800",
      });
      return z.NEVER;
    }
    return parts.map(Number);
  });

/** An http: or https: URL: zod's url() takes any scheme, `localhost:8545` and `ws://…` too. */
const httpUrl = (message: string) => z.string().refine(isHttpUrl, message);

// Mixed case must be the EIP-55 checksum, as everywhere else (a mistyped address fails it).
const address = z
  .string()
  .refine(isChecksummedOrLowerAddress, "must be a 20-byte hex address, all lower case or checksummed")
  .transform((value) => value.toLowerCase() as `0x${string}`);

const addressList = z
  .string()
  .optional()
  .transform((value, ctx) => {
    if (value === undefined || value.trim() === "") return undefined;
    const items = value.split(",").map((item) => item.trim());
    for (const item of items) {
      if (!isChecksummedOrLowerAddress(item)) {
        ctx.addIssue({
          code: "custom",
          message:
            "must be a comma-separated list of 20-byte hex addresses, each all lower case or checksummed",
        });
        return z.NEVER;
      }
    }
    return items.map((item) => item.toLowerCase() as `0x${string}`);
  });

const cidrList = z
  .string()
  .optional()
  .transform((value, ctx) => {
    const parsed = parseCidrList(value ?? "");
    if (!parsed.ok) {
      ctx.addIssue({ code: "custom", message: `must be a comma-separated list of CIDRs (${parsed.error})` });
      return z.NEVER;
    }
    return parsed.value;
  });

const envSchema = z.object({
  AGENT_GATEWAY_ENABLED: literalTrue,
  AGENT_PUBLIC_REGISTRATION_ENABLED: literalTrue,
  AGENT_FAUCET_ENABLED: literalTrue,
  AGENT_TRANSFER_ENABLED: literalTrue,
  AGENT_X402_ENABLED: literalTrue,
  AGENT_SIGNER_LIVE_IDENTITY_ENABLED: literalTrue,
  /** Ours, local development only: loopback clients may register (each address its own group). */
  AGENT_REGISTRATION_ALLOW_LOOPBACK: literalTrue,
  /**
   * Ours: the operator acknowledges that the origin listens on a non-loopback address with no
   * trusted proxy in front (see crossFieldErrors). Only the literal `1` acknowledges.
   */
  AGENT_ALLOW_PUBLIC_BIND: z.enum(["1"]).optional(),

  AGENT_REGISTRATION_IP_SECRET: secret,
  AGENT_REGISTRATION_ADMIN_SECRET: secret,
  AGENT_EDGE_SHARED_SECRET: secret,
  AGENT_ADMIN_API_TOKEN: secret,

  AGENT_TRUSTED_PROXIES: cidrList,

  AGENT_FAUCET_PAYOUT_AMOUNT: units(1_000_000n),
  AGENT_FAUCET_COOLDOWN_MS: integer(86_400_000, 0, 365 * 86_400_000),
  AGENT_FAUCET_DAILY_LIMIT: units(1_000_000n),

  AGENT_TRANSFER_PER_TX_LIMIT: units(0n),
  AGENT_TRANSFER_DAILY_LIMIT: units(0n),
  AGENT_TRANSFER_RECIPIENT_ALLOWLIST: addressList,
  /**
   * Ours: how long an action an agent's policy held waits for an operator before it ends
   * `expired` (docs/agents.md#holds); 1 s to 30 days.
   */
  AGENT_POLICY_HOLD_SECONDS: integer(86_400, 1, 30 * 86_400),

  /** Ours: days the event log keeps an event before the sweep deletes it (docs/events.md#retention). */
  AGENT_EVENTS_RETENTION_DAYS: integer(30, 1, 3_650),
  /**
   * Ours: event streams one token may hold open on one origin; one more closes the token's oldest
   * (docs/events.md#limits).
   */
  AGENT_EVENTS_STREAMS_PER_TOKEN: integer(4, 1, 100),
  /**
   * Ours: the webhook retry schedule, seconds before each attempt after the event (the first is
   * usually 0); by default the Standard Webhooks schedule (docs/operations.md#webhooks).
   */
  AGENT_WEBHOOKS_RETRY_SECONDS: retrySchedule,
  /** Ours: deliver webhooks to private, loopback and link-local addresses too (local use only). */
  AGENT_WEBHOOKS_ALLOW_PRIVATE: literalTrue,
  /** Ours: the origin's Ed25519 webhook signing key, PKCS#8 PEM, mode 0600 (docs/operations.md#webhooks). */
  AGENT_WEBHOOKS_SIGNING_KEY_FILE: z.string().optional(),
  /** Ours: how long one delivery may take, headers and body, before it counts as failed. */
  AGENT_WEBHOOKS_TIMEOUT_MS: integer(15_000, 100, 60_000),
  /**
   * Ours: pending deliveries one endpoint may have; at that many the fan-out queues no more for it
   * until some end, so a receiver that is down grows no table (docs/operations.md#webhooks).
   */
  AGENT_WEBHOOKS_MAX_PENDING: integer(1_000, 1, 100_000),

  AGENT_X402_AMOUNT: optionalUnits,
  AGENT_X402_PAY_TO: address.optional(),
  AGENT_X402_MAX_TIMEOUT_SECONDS: integer(180, 1, 86_400),
  /**
   * Ours: how long a paid request waits for its settlement's receipt before 402 settlement_pending;
   * at most X402_RECEIPT_TIMEOUT_MAX_MS, so a settle always answers before the official facilitator
   * client gives up on it (docs/configuration.md#variables).
   */
  AGENT_X402_RECEIPT_TIMEOUT_MS: integer(10_000, 100, Number.MAX_SAFE_INTEGER).pipe(
    z
      .number()
      .max(
        X402_RECEIPT_TIMEOUT_MAX_MS,
        `must be at most ${X402_RECEIPT_TIMEOUT_MAX_MS}: the official x402 facilitator client gives up on a settle after ${X402_CLIENT_TIMEOUT_MS / 1000} s, and a settle takes up to ${X402_SETTLE_BEYOND_RECEIPT_MS / 1000} s more than its receipt wait`,
      ),
  ),
  /**
   * Ours: `true` turns the demo's signed offers and receipts off, even where its payTo is the
   * enclave's payee key (docs/configuration.md#variables).
   */
  AGENT_X402_OFFER_RECEIPTS_DISABLED: literalTrue,
  /** Ours: authorizations one agent may have signed per UTC day (sealed in the enclave too). */
  AGENT_X402_DAILY_LIMIT: integer(1_000, 0, 10_000_000),
  /**
   * Ours: seconds of margin a settlement needs at both ends of an authorization's validity window
   * (the chain checks it against a block's time, not ours; sealed in the enclave too).
   */
  AGENT_X402_VALIDITY_MARGIN_SECONDS: integer(6, 0, 600),
  /**
   * Ours: the facilitator's verify and settle and the demo's paid retry, per minute, of one client:
   * of one payer (the authorization's `from`) for well-formed payments it signed, of one address
   * (IPv4, IPv6 /64) for requests the checks without chain or database refuse (x402/payee/client-limit.ts).
   */
  AGENT_X402_RATE_LIMIT_PER_MINUTE: integer(1_200, 1, 1_000_000),
  /**
   * Ours: well-formed, signed payments one address (IPv4, IPv6 /64) may present per minute, all
   * its payers together (each reads the chain and the database; a settle signs).
   */
  AGENT_X402_ADDRESS_PAYMENTS_PER_MINUTE: integer(3_600, 1, 10_000_000),
  /**
   * Ours: reads of the facilitator's public routes that query the database (discovery's list and
   * search, a settlement's status) one address (IPv4, IPv6 /64) may make per minute.
   */
  AGENT_X402_READS_PER_MINUTE: integer(600, 1, 1_000_000),
  /**
   * Ours: the balances, in units, under which the console's chart shows the treasury and the
   * settler below their floor (docs/operations.md#the-node-in-charts): ten default payouts, and one
   * coin of gas.
   */
  AGENT_TREASURY_FLOOR: units(10_000_000n),
  AGENT_SETTLER_FLOOR: units(1_000_000n),
  /**
   * Ours: the public base URL clients reach this node at (scheme, host, port and BASE_PATH), e.g.
   * https://wallet.example.com/77; names the resource in x402 quotes.
   */
  AGENT_PUBLIC_BASE_URL: httpUrl("must be an http(s) URL")
    // A resource's path and query are put after it: a query or fragment of its own garbled every
    // x402 quote's resource URL (`…/77?x=1/x402/demo`).
    .refine(
      (value) => !/[?#]/.test(value),
      "must have no query or fragment (a resource's own path and query follow it)",
    )
    .optional(),
  /**
   * Ours: the console's WebAuthn relying party id, what an operator's passkey is bound to
   * (docs/operations.md#passkeys); default `localhost` on a loopback listener, else ORIGIN_HOST, or
   * CONSOLE_ORIGIN's host where that default is neither that host nor a suffix of it.
   */
  CONSOLE_RP_ID: z
    .string()
    .regex(/^[a-z0-9.-]{1,253}$/, "must be a host name (lowercase), never an IP address")
    // A browser takes no IP address as an rpId: every passkey ceremony would fail in the page.
    .refine(
      (value) => !/^\d{1,3}(\.\d{1,3}){3}$/.test(value),
      "must be a host name (lowercase), never an IP address",
    )
    .optional(),
  /** Ours: the console's origin as the browser names it (scheme, host, port); default http://RP_ID:ORIGIN_PORT. */
  CONSOLE_ORIGIN: httpUrl("must be an http(s) origin").optional(),
  /**
   * Ours: more host names the console and `/metrics` answer at, besides CONSOLE_ORIGIN's host,
   * localhost and IP addresses (a scraper's service name), comma-separated (http/cross-site.ts).
   */
  CONSOLE_ALLOWED_HOSTS: z
    .string()
    .transform((value) =>
      value
        .split(",")
        .map((host) => host.trim().toLowerCase())
        .filter((host) => host !== ""),
    )
    .pipe(
      z.array(z.string().regex(/^[a-z0-9.-]{1,253}$/, "must be host names without port, comma-separated")),
    )
    .optional(),

  AGENT_SIGNER_SVC_HSM_ENDPOINT: z
    .string()
    // unix:///absolute/path, or unix://relative/path resolved against the working directory.
    .regex(/^unix:\/\/.+/, "must be unix:///path/to/socket")
    .optional(),
  AGENT_ADMIN_AUTHORITY_KEY_FILE: z.string().min(1).optional(),
  AGENT_ENV_ID: z
    .string()
    .regex(/^[a-z0-9-]{1,64}$/, "must match [a-z0-9-]{1,64}")
    .default("local-dev"),
  AGENT_OPERATOR_POOL_ADDRESS: address.optional(),

  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, "must be a postgres:// or postgresql:// URL")
    // Both drivers read it with the WHATWG URL parser, which refuses an unencoded `#` or space (in
    // a password, say) or a port past 65535 with a bare "Invalid URL" that names nothing.
    .refine(
      (value) => URL.canParse(value),
      "is not a URL the drivers can read: percent-encode the user and password (# is %23, space %20) and check the port",
    )
    .optional(),
  DATABASE_DRIVER: z.enum(["pg", "neon"]).optional(),
  DATABASE_POOL_SIZE: integer(20, 1, 500),
  // At least twice the statement bound, which a money batch's wait between statements keeps within
  // (its chain reads and the enclave's signature): a lower bound would end batches that are alive.
  DATABASE_IDLE_IN_TRANSACTION_MS: integer(TRANSACTION_IDLE_MS, 2 * STATEMENT_WAIT_MS, 3_600_000),
  /** Ours: route the Neon driver's WebSocket through a plain relay (tests, local dev); no TLS. */
  DATABASE_NEON_WS_PROXY: z.string().min(1).optional(),
  EMBEDDED_PG_DIR: z.string().min(1).default(".data/pg"),
  EMBEDDED_PG_PORT: integer(54320, 1, 65_535),

  CHAIN_RPC_URL: httpUrl("must be an http(s) URL").optional(),
  CHAIN_RPC_TIMEOUT_MS: integer(5_000, 100, 120_000),
  CHAIN_RPC_BATCH_LIMIT: integer(100, 1, 1_000),
  /**
   * Ours: how long an /rpc answer may take to leave once made before its connection is closed
   * (origin/gateway/limits.ts RPC_ANSWER_DEADLINE_MS, the default).
   */
  AGENT_RPC_ANSWER_DEADLINE_MS: integer(RPC_ANSWER_DEADLINE_MS, 1_000, 300_000),
  BASE_PATH: z
    .string()
    .regex(/^\/[A-Za-z0-9_-]+(\/[A-Za-z0-9_-]+)*$/, "must look like /77")
    .default(DEFAULT_BASE_PATH),
  ORIGIN_HOST: z.string().min(1).default("127.0.0.1"),
  ORIGIN_PORT: integer(8788, 0, 65_535),

  BACKUP_DIR: z.string().min(1).default(".data/backups"),
  /** Ours: the registration proof of work's difficulty before the day's fill adds to it; 0 = off. */
  AGENT_REGISTRATION_POW_BITS: integer(0, 0, 24),
  KEY_POOL_TARGET: integer(20, 0, 100_000),
  KEY_POOL_BATCH_SIZE: integer(10, 1, 1_000),
  KEY_BATCH_STUCK_SECONDS: integer(300, 1, 86_400),
  IDENTITY_SWEEP_WINDOW_SECONDS: integer(3_600, 1, 30 * 86_400),
  IDENTITY_SWEEP_PERIOD_SECONDS: integer(300, 1, 86_400),

  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
});

type Env = z.output<typeof envSchema>;

/** Names of the secrets that must be pairwise distinct. */
const SECRET_NAMES = [
  "AGENT_REGISTRATION_IP_SECRET",
  "AGENT_REGISTRATION_ADMIN_SECRET",
  "AGENT_EDGE_SHARED_SECRET",
  "AGENT_ADMIN_API_TOKEN",
] as const;

export type Config = {
  gatewayEnabled: boolean;
  features: {
    publicRegistration: boolean;
    faucet: boolean;
    transfers: boolean;
    x402: boolean;
    liveIdentity: boolean;
    /** Local development only (refused unless ORIGIN_HOST is loopback): loopback clients may register. */
    registrationAllowLoopback: boolean;
  };
  secrets: {
    registrationIp: string | undefined;
    registrationAdmin: string | undefined;
    edgeShared: string | undefined;
    adminApiToken: string | undefined;
  };
  trustedProxies: Env["AGENT_TRUSTED_PROXIES"];
  faucet: { payoutUnits: bigint; cooldownMs: number; dailyLimitUnits: bigint };
  transfers: {
    perTxLimitUnits: bigint;
    dailyLimitUnits: bigint;
    recipientAllowlist: `0x${string}`[] | undefined;
    /** How long a held transfer waits for an operator, in seconds. */
    holdSeconds: number;
  };
  x402: {
    amountUnits: bigint | undefined;
    payTo: `0x${string}` | undefined;
    maxTimeoutSeconds: number;
    receiptTimeoutMs: number;
    /** The demo signs offers and receipts when its payTo is the enclave's payee key, unless this is false. */
    offerReceipts: boolean;
    /** Authorizations per agent per UTC day. */
    dailyLimit: number;
    validityMarginSeconds: number;
    /** Refused requests per address, signed payments per payer, per minute (x402/payee/client-limit.ts). */
    rateLimitPerMinute: number;
    /** Signed payments per address per minute, all payers together. */
    addressPaymentsPerMinute: number;
    readsPerMinute: number;
  };
  /** The event log and the agents' streams (docs/events.md). */
  events: { retentionDays: number; streamsPerToken: number };
  /** Webhook delivery (docs/operations.md#webhooks). */
  webhooks: {
    /** Seconds before attempt 1, 2, …: one attempt per entry. */
    retrySeconds: number[];
    allowPrivate: boolean;
    signingKeyFile: string | undefined;
    timeoutMs: number;
    /** Pending deliveries one endpoint may have before the fan-out stops queueing for it. */
    maxPending: number;
  };
  signer: { endpoint: string | undefined; adminAuthorityKeyFile: string | undefined };
  envId: string;
  operatorPool: `0x${string}` | undefined;
  database: {
    url: string | undefined;
    driver: "pg" | "neon" | undefined;
    /** Connections the origin's pool may open. */
    poolSize: number;
    /** How long Postgres keeps a transaction of the pool waiting for its next statement. */
    idleInTransactionMs: number;
    neonWsProxy: string | undefined;
    embedded: { dir: string; port: number };
  };
  chain: { rpcUrl: string | undefined; timeoutMs: number; batchLimit: number };
  http: {
    basePath: string;
    host: string;
    port: number;
    publicBaseUrl: string | undefined;
    rpcAnswerDeadlineMs: number;
  };
  /** The console's WebAuthn relying party: what enrolled passkeys are bound to. */
  console: { rpId: string; origin: string; allowedHosts: readonly string[] };
  keyPool: { target: number; batchSize: number; stuckAfterSeconds: number; backupDir: string };
  /** Public registration's proof of work: its base difficulty in bits, 0 when off. */
  registration: { proofOfWorkBits: number };
  identitySweep: { windowSeconds: number; periodSeconds: number };
  /** The service wallets' floors the console's chart draws, in units. */
  floors: { treasuryUnits: bigint; settlerUnits: bigint };
  logLevel: Env["LOG_LEVEL"];
};

/** The configuration, or every refusal of the environment (one line per bad variable). */
export type ConfigResult = Result<Config, string[]>;

/**
 * Parses the environment. On failure it lists every bad variable at once, naming the variable and
 * never echoing its value (a secret may be in it).
 */
export function parseConfig(rawEnv: Record<string, string | undefined>): ConfigResult {
  // `NAME=` (as .env files and shells write it) means unset, not an empty value.
  const env = Object.fromEntries(Object.entries(rawEnv).filter(([, value]) => value !== ""));
  const parsed = envSchema.safeParse(env);
  const errors: string[] = [];
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      errors.push(`${String(issue.path[0] ?? "environment")}: ${issue.message}`);
    }
  }
  errors.push(...crossFieldErrors(env));
  if (parsed.success)
    errors.push(
      ...scheduleWithinRetention(parsed.data),
      ...faucetDayHoldsAPayout(parsed.data),
      ...marginWithinQuote(parsed.data, env),
    );
  if (errors.length > 0 || !parsed.success) return err([...new Set(errors)]);
  return ok(toConfig(parsed.data));
}

/** Like parseConfig, but throws a ConfigError carrying every message. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  const result = parseConfig(env);
  if (!result.ok) throw new ConfigError(result.error);
  return result.value;
}

export class ConfigError extends Error {
  readonly errors: string[];
  constructor(errors: string[]) {
    super(`invalid configuration:\n  - ${errors.join("\n  - ")}`);
    this.name = "ConfigError";
    this.errors = errors;
  }
}

/**
 * A webhook delivery's last attempt must come while its event is kept: the retention's sweeps
 * delete an event with its deliveries, owed or not, and nothing would say the delivery was lost.
 * Counted at its longest: each wait after a failed attempt a tenth longer, or the hour a receiver's
 * Retry-After may ask.
 */
function scheduleWithinRetention(env: Env): string[] {
  const [first = 0, ...afterFailures] = env.AGENT_WEBHOOKS_RETRY_SECONDS;
  const longest = afterFailures.reduce(
    (total, step) => total + Math.max(step * (1 + JITTER_FRACTION), MAX_RETRY_AFTER_SECONDS),
    first,
  );
  const kept = env.AGENT_EVENTS_RETENTION_DAYS * 86_400;
  if (longest < kept) return [];
  return [
    `AGENT_WEBHOOKS_RETRY_SECONDS: the schedule can take ${Math.ceil(longest)} s (each wait a tenth longer, or an hour a receiver's Retry-After asks), not less than AGENT_EVENTS_RETENTION_DAYS=${env.AGENT_EVENTS_RETENTION_DAYS} (${kept} s): a delivery's last attempts would come after its event and the delivery were swept; shorten the schedule or keep events longer`,
  ];
}

/**
 * A daily limit below the payout pays nothing ever, and each refusal's Retry-After names a
 * midnight after which the same payout is refused again: a faucet on must fit one payout a day.
 */
function faucetDayHoldsAPayout(env: {
  AGENT_FAUCET_ENABLED: boolean;
  AGENT_FAUCET_PAYOUT_AMOUNT: bigint;
  AGENT_FAUCET_DAILY_LIMIT: bigint;
}): string[] {
  const { AGENT_FAUCET_PAYOUT_AMOUNT: payout, AGENT_FAUCET_DAILY_LIMIT: daily } = env;
  if (!env.AGENT_FAUCET_ENABLED || daily >= payout) return [];
  return [
    `AGENT_FAUCET_DAILY_LIMIT: ${daily} is below AGENT_FAUCET_PAYOUT_AMOUNT (${payout}): no payout fits a day, so the faucet would pay nothing and tell every agent to come back at midnight`,
  ];
}

/**
 * An authorization must be valid for the margin on both sides of now and for no longer than the
 * quote's maxTimeoutSeconds: a margin that large would refuse every payment. Judged on the values
 * the node runs with, the defaults included: read from the environment, an unset margin counted
 * as 0 and a node quoting 5 s started with its default 6 s, to refuse every payment.
 */
function marginWithinQuote(parsed: Env, env: Record<string, string | undefined>): string[] {
  if (!parsed.AGENT_X402_ENABLED) return [];
  const margin = parsed.AGENT_X402_VALIDITY_MARGIN_SECONDS;
  const quoted = demoMaxTimeoutSeconds(parsed.AGENT_X402_MAX_TIMEOUT_SECONDS);
  if (margin < quoted) return [];
  const unset = env.AGENT_X402_VALIDITY_MARGIN_SECONDS === undefined;
  return [
    `AGENT_X402_VALIDITY_MARGIN_SECONDS: must be below the demo quote's maxTimeoutSeconds (${quoted})${unset ? `, and is unset: its default is ${margin}; set a smaller one or raise AGENT_X402_MAX_TIMEOUT_SECONDS` : ""}`,
  ];
}

function crossFieldErrors(env: Record<string, string | undefined>): string[] {
  const errors: string[] = [];
  // Two equal secrets stop the process; one leaked value must not unlock two doors.
  for (let i = 0; i < SECRET_NAMES.length; i++) {
    for (let j = i + 1; j < SECRET_NAMES.length; j++) {
      const a = env[SECRET_NAMES[i]!];
      const b = env[SECRET_NAMES[j]!];
      if (a !== undefined && a !== "" && a === b) {
        errors.push(`${SECRET_NAMES[j]}: must differ from ${SECRET_NAMES[i]} (the two secrets are equal)`);
      }
    }
  }
  if (env.AGENT_PUBLIC_REGISTRATION_ENABLED === "true") {
    for (const name of ["AGENT_REGISTRATION_IP_SECRET", "AGENT_EDGE_SHARED_SECRET"] as const) {
      if (!env[name]) errors.push(`${name}: required when AGENT_PUBLIC_REGISTRATION_ENABLED=true`);
    }
  }
  // Production must refuse loopback registration addresses; the switch exists for the local stack,
  // whose clients are all on loopback, and only an origin that itself listens on loopback may use it.
  if (env.AGENT_REGISTRATION_ALLOW_LOOPBACK === "true" && !isLoopbackHost(env.ORIGIN_HOST ?? "127.0.0.1")) {
    errors.push("AGENT_REGISTRATION_ALLOW_LOOPBACK: allowed only when ORIGIN_HOST is a loopback address");
  }
  // docs/configuration.md#the-clients-address: behind a proxy without AGENT_TRUSTED_PROXIES every
  // client is the proxy and the per-IP limits collapse into one bucket; bound publicly, the private
  // console and /metrics face the network. Listening beyond loopback needs one or the other said
  // out loud.
  const host = env.ORIGIN_HOST ?? "127.0.0.1";
  if (!isLoopbackHost(host) && !env.AGENT_TRUSTED_PROXIES?.trim() && env.AGENT_ALLOW_PUBLIC_BIND !== "1") {
    errors.push(
      `ORIGIN_HOST: ${host} is not a loopback address; set AGENT_TRUSTED_PROXIES to the CIDRs of the ` +
        "proxies in front of the origin, or AGENT_ALLOW_PUBLIC_BIND=1 to accept that clients reach it directly",
    );
  }
  if (env.AGENT_X402_ENABLED === "true") {
    for (const name of ["AGENT_X402_AMOUNT", "AGENT_X402_PAY_TO"] as const) {
      if (!env[name]) errors.push(`${name}: required when AGENT_X402_ENABLED=true`);
    }
  }
  // A money batch holds its senders' nonce rows through its chain reads (made at once) and then the
  // enclave's signature; another batch of a sender in common waits for them at the lock, in one
  // statement that STATEMENT_WAIT_MS bounds. A chain wait longer than this fails that batch 503
  // behind a chain that is slow but answers.
  const moneyOn = ["AGENT_FAUCET_ENABLED", "AGENT_TRANSFER_ENABLED", "AGENT_X402_ENABLED"].some(
    (name) => env[name] === "true",
  );
  const rpcTimeoutMs = Number(env.CHAIN_RPC_TIMEOUT_MS ?? 0);
  const maxRpcTimeoutMs = STATEMENT_WAIT_MS - SIGNER_REQUEST_TIMEOUT_MS;
  if (moneyOn && rpcTimeoutMs > maxRpcTimeoutMs) {
    errors.push(
      `CHAIN_RPC_TIMEOUT_MS: at most ${maxRpcTimeoutMs} with the faucet, transfers or x402 on: a batch holds a ` +
        `sender's lock through its chain reads and the enclave's signature (${SIGNER_REQUEST_TIMEOUT_MS / 1000} s), ` +
        `and another batch of that sender waits for it within the database's statement bound ` +
        `(STATEMENT_WAIT_MS, ${STATEMENT_WAIT_MS / 1000} s)`,
    );
  }
  if (env.DATABASE_DRIVER === "neon" && !env.DATABASE_URL) {
    errors.push("DATABASE_URL: required when DATABASE_DRIVER=neon");
  }
  if (env.CONSOLE_ORIGIN && env.CONSOLE_RP_ID && URL.canParse(env.CONSOLE_ORIGIN)) {
    // WebAuthn: the rpId is the origin's host or a registrable suffix of it.
    const host = new URL(env.CONSOLE_ORIGIN).hostname;
    if (!isRpIdOf(env.CONSOLE_RP_ID, host)) {
      errors.push(`CONSOLE_RP_ID: must be CONSOLE_ORIGIN's host (${host}) or a suffix of it`);
    }
  }
  return errors;
}

/**
 * The console's rpId and origin: as configured, else derived from where the origin listens (a
 * browser takes no IP address as an rpId, so a loopback listener is `localhost`).
 */
function consoleRelyingParty(env: {
  CONSOLE_RP_ID?: string | undefined;
  CONSOLE_ORIGIN?: string | undefined;
  CONSOLE_ALLOWED_HOSTS?: string[] | undefined;
  ORIGIN_HOST: string;
  ORIGIN_PORT: number;
}): Config["console"] {
  const listenerRpId = isLoopbackHost(env.ORIGIN_HOST) ? "localhost" : env.ORIGIN_HOST;
  // Behind a proxy the origin listens on loopback, and `localhost` as the rpId of a console at
  // another name failed every passkey ceremony: CONSOLE_ORIGIN's host then, where the listener's
  // name is not its host or a suffix of it (a name that is keeps its enrolled passkeys).
  const consoleHost = env.CONSOLE_ORIGIN ? new URL(env.CONSOLE_ORIGIN).hostname : undefined;
  const rpId =
    env.CONSOLE_RP_ID ??
    (consoleHost !== undefined && !isIpAddress(consoleHost) && !isRpIdOf(listenerRpId, consoleHost)
      ? consoleHost
      : listenerRpId);
  const derived = `http://${rpId}:${env.ORIGIN_PORT}`;
  // As a browser names it (the assertion's origin, compared as text): no port at http's own, 80.
  const origin = env.CONSOLE_ORIGIN
    ? new URL(env.CONSOLE_ORIGIN).origin
    : URL.canParse(derived)
      ? new URL(derived).origin
      : derived;
  // An origin that does not parse (an IP address as ORIGIN_HOST, which a passkey cannot use either)
  // leaves localhost, IP addresses and CONSOLE_ALLOWED_HOSTS.
  const own = URL.canParse(origin) ? [new URL(origin).hostname] : [];
  const allowedHosts = [...new Set([...own, ...(env.CONSOLE_ALLOWED_HOSTS ?? [])])];
  return { rpId, origin, allowedHosts };
}

/** WebAuthn's rule: an rpId is the origin's host or a suffix of it. */
function isRpIdOf(rpId: string, host: string): boolean {
  return host === rpId || host.endsWith(`.${rpId}`);
}

/** An IPv4 literal, or an IPv6 one as a URL's hostname writes it (in brackets). */
function isIpAddress(host: string): boolean {
  return /^\d{1,3}(\.\d{1,3}){3}$/.test(host) || host.startsWith("[");
}

function isLoopbackHost(host: string): boolean {
  return host === "localhost" || host === "::1" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);
}

function toConfig(env: Env): Config {
  return {
    gatewayEnabled: env.AGENT_GATEWAY_ENABLED,
    features: {
      publicRegistration: env.AGENT_PUBLIC_REGISTRATION_ENABLED,
      faucet: env.AGENT_FAUCET_ENABLED,
      transfers: env.AGENT_TRANSFER_ENABLED,
      x402: env.AGENT_X402_ENABLED,
      liveIdentity: env.AGENT_SIGNER_LIVE_IDENTITY_ENABLED,
      registrationAllowLoopback: env.AGENT_REGISTRATION_ALLOW_LOOPBACK,
    },
    secrets: {
      registrationIp: env.AGENT_REGISTRATION_IP_SECRET,
      registrationAdmin: env.AGENT_REGISTRATION_ADMIN_SECRET,
      edgeShared: env.AGENT_EDGE_SHARED_SECRET,
      adminApiToken: env.AGENT_ADMIN_API_TOKEN,
    },
    trustedProxies: env.AGENT_TRUSTED_PROXIES,
    faucet: {
      payoutUnits: env.AGENT_FAUCET_PAYOUT_AMOUNT,
      cooldownMs: env.AGENT_FAUCET_COOLDOWN_MS,
      dailyLimitUnits: env.AGENT_FAUCET_DAILY_LIMIT,
    },
    transfers: {
      perTxLimitUnits: env.AGENT_TRANSFER_PER_TX_LIMIT,
      dailyLimitUnits: env.AGENT_TRANSFER_DAILY_LIMIT,
      recipientAllowlist: env.AGENT_TRANSFER_RECIPIENT_ALLOWLIST,
      holdSeconds: env.AGENT_POLICY_HOLD_SECONDS,
    },
    x402: {
      amountUnits: env.AGENT_X402_AMOUNT,
      payTo: env.AGENT_X402_PAY_TO,
      maxTimeoutSeconds: env.AGENT_X402_MAX_TIMEOUT_SECONDS,
      receiptTimeoutMs: env.AGENT_X402_RECEIPT_TIMEOUT_MS,
      offerReceipts: !env.AGENT_X402_OFFER_RECEIPTS_DISABLED,
      dailyLimit: env.AGENT_X402_DAILY_LIMIT,
      validityMarginSeconds: env.AGENT_X402_VALIDITY_MARGIN_SECONDS,
      rateLimitPerMinute: env.AGENT_X402_RATE_LIMIT_PER_MINUTE,
      addressPaymentsPerMinute: env.AGENT_X402_ADDRESS_PAYMENTS_PER_MINUTE,
      readsPerMinute: env.AGENT_X402_READS_PER_MINUTE,
    },
    events: {
      retentionDays: env.AGENT_EVENTS_RETENTION_DAYS,
      streamsPerToken: env.AGENT_EVENTS_STREAMS_PER_TOKEN,
    },
    webhooks: {
      retrySeconds: env.AGENT_WEBHOOKS_RETRY_SECONDS,
      allowPrivate: env.AGENT_WEBHOOKS_ALLOW_PRIVATE,
      signingKeyFile: env.AGENT_WEBHOOKS_SIGNING_KEY_FILE,
      timeoutMs: env.AGENT_WEBHOOKS_TIMEOUT_MS,
      maxPending: env.AGENT_WEBHOOKS_MAX_PENDING,
    },
    signer: {
      endpoint: env.AGENT_SIGNER_SVC_HSM_ENDPOINT,
      adminAuthorityKeyFile: env.AGENT_ADMIN_AUTHORITY_KEY_FILE,
    },
    envId: env.AGENT_ENV_ID,
    operatorPool: env.AGENT_OPERATOR_POOL_ADDRESS,
    database: {
      url: env.DATABASE_URL,
      driver: env.DATABASE_DRIVER,
      poolSize: env.DATABASE_POOL_SIZE,
      idleInTransactionMs: env.DATABASE_IDLE_IN_TRANSACTION_MS,
      neonWsProxy: env.DATABASE_NEON_WS_PROXY,
      embedded: { dir: env.EMBEDDED_PG_DIR, port: env.EMBEDDED_PG_PORT },
    },
    chain: {
      rpcUrl: env.CHAIN_RPC_URL,
      timeoutMs: env.CHAIN_RPC_TIMEOUT_MS,
      batchLimit: env.CHAIN_RPC_BATCH_LIMIT,
    },
    http: {
      basePath: env.BASE_PATH,
      host: env.ORIGIN_HOST,
      port: env.ORIGIN_PORT,
      publicBaseUrl: env.AGENT_PUBLIC_BASE_URL?.replace(/\/+$/, ""),
      rpcAnswerDeadlineMs: env.AGENT_RPC_ANSWER_DEADLINE_MS,
    },
    console: consoleRelyingParty(env),
    keyPool: {
      target: env.KEY_POOL_TARGET,
      batchSize: env.KEY_POOL_BATCH_SIZE,
      stuckAfterSeconds: env.KEY_BATCH_STUCK_SECONDS,
      backupDir: env.BACKUP_DIR,
    },
    registration: { proofOfWorkBits: env.AGENT_REGISTRATION_POW_BITS },
    identitySweep: {
      windowSeconds: env.IDENTITY_SWEEP_WINDOW_SECONDS,
      periodSeconds: env.IDENTITY_SWEEP_PERIOD_SECONDS,
    },
    floors: { treasuryUnits: env.AGENT_TREASURY_FLOOR, settlerUnits: env.AGENT_SETTLER_FLOOR },
    logLevel: env.LOG_LEVEL,
  };
}
