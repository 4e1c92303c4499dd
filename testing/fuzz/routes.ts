/**
 * The routes the fuzz suite covers: one entry per route, each naming its credentials, its body
 * (generated from the route's own zod schema) and the shape of its refusals. A new route is one
 * entry here; a new credential or refusal shape is one case in requests.ts or refusals.ts.
 */
import fc from "fast-check";
import type { z } from "zod";
import {
  identityChangeRequestSchema,
  settingsChangeRequestSchema,
  settingsSchema,
} from "../../shared/console-schemas.ts";
import { RPC_MAX_BATCH_BYTES, RPC_READ_ALLOWLIST } from "../../shared/constants.ts";
import type { ErrorCode } from "../../shared/error-codes.ts";
import {
  faucetRequestSchema,
  transferRequestSchema,
  x402AuthorizeRequestSchema,
} from "../../shared/gateway-schemas.ts";
import { anyJson } from "./hostile.ts";
import { facilitatorBodies, payableQuotes } from "./x402-payments.ts";
import { arbitraryFromSchema } from "./zod-arbitrary.ts";

/**
 * Who the request claims to be. Each kind mixes the right credentials (so the fuzz gets past
 * authentication to the route's own validation) with wrong, malformed and hostile ones.
 */
export type Credentials =
  | "agent"
  | "admin_read"
  | "admin_change"
  | "metrics_scrape"
  | "registration"
  /** A `PAYMENT-SIGNATURE` header: Base64 of a signed envelope, mutated, hostile or broken (x402-payments.ts). */
  | "payment"
  | "none";

/**
 * The wire format of the route's refusals (STYLE "Errors: three wire formats"); x402's differs by
 * surface: the resource's 402 quote with a reason, and the facilitator's verify and settle data.
 */
export type RefusalShape = "envelope" | "jsonrpc" | "x402_resource" | "x402_verify" | "x402_settle";

export type FuzzRoute = {
  name: string;
  method: "GET" | "POST";
  /** Path under {base}; an arbitrary for routes with parameters. */
  path: string | fc.Arbitrary<string>;
  credentials: Credentials;
  /** Valid-ish bodies (from the route's schema) and the route's body limit; absent: no body. */
  body?: { valid: fc.Arbitrary<unknown>; maxBytes: number };
  refusal: RefusalShape;
  /** A read route changes no state whatever its answer; others may on success only. */
  readOnly: boolean;
  /** 5xx error codes this route may answer by the spec in the suite's state (e.g. registration's 503). */
  allowed5xx?: ErrorCode[];
  /**
   * What a refusal may record by the spec: an admitted registration attempt (SPEC Limits rule 1),
   * or the idempotency record of a money action refused after its claim (a `failed` action with
   * the refusal's code, so a repeat of the key answers the same).
   */
  refusalMayRecord?: ("registration_attempt" | "failed_action")[];
};

/** Overrides of top-level fields, for values the schema checks only in a refinement (checksums). */
function fromSchema(schema: z.ZodType, fields: Record<string, fc.Arbitrary<unknown>> = {}) {
  return arbitraryFromSchema(schema).chain((value) =>
    value && typeof value === "object" && !Array.isArray(value)
      ? fc.record(fields).map((overrides) => ({ ...value, ...overrides }))
      : fc.constant(value),
  );
}

const lowercaseAddress = fc
  .uint8Array({ minLength: 20, maxLength: 20 })
  .map((bytes) => `0x${Buffer.from(bytes).toString("hex")}`);

const settingNames = Object.keys(settingsSchema.shape);
const settingsChanges = fc.dictionary(
  fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...settingNames) }, { weight: 1, arbitrary: fc.string() }),
  fc.oneof(fc.boolean(), fc.integer({ min: -5, max: 2_000_000 }), fc.double()),
  { maxKeys: 3 },
);

const rpcCall = fc.record(
  {
    jsonrpc: fc.oneof({ weight: 5, arbitrary: fc.constant("2.0") }, { weight: 1, arbitrary: anyJson }),
    id: fc.oneof(fc.integer(), fc.string(), fc.constant(null), anyJson),
    method: fc.oneof(
      { weight: 5, arbitrary: fc.constantFrom(...RPC_READ_ALLOWLIST) },
      {
        weight: 1,
        arbitrary: fc.constantFrom("eth_sendRawTransaction", "dev_setBalance", "eth_call", "__proto__"),
      },
      { weight: 1, arbitrary: fc.string() },
    ),
    params: fc.oneof(
      fc.tuple(lowercaseAddress, fc.constantFrom("latest", "0x0", "pending", "0xffffffffffffffffffff")),
      fc.tuple(fc.constantFrom("latest", "0x1", "0x" + "f".repeat(64)), fc.boolean()),
      fc.tuple(
        fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => `0x${Buffer.from(b).toString("hex")}`),
      ),
      anyJson,
    ),
  },
  { requiredKeys: ["jsonrpc", "method"] },
);

const uuidish = fc.oneof(
  fc.uuid(),
  fc.string().map(encodeURIComponent),
  fc.constantFrom(
    "%2e%2e",
    "..%2f..%2fadmin",
    "%00",
    "%E0%A4%A",
    "%ZZ",
    "00000000-0000-0000-0000-000000000000",
  ),
);

/** Ids the stack knows, so some fuzzed references hit real rows. */
export type KnownIds = { agentIds: string[] };

export function fuzzRoutes(known: KnownIds): FuzzRoute[] {
  const agentId = known.agentIds.length ? fc.oneof(fc.uuid(), fc.constantFrom(...known.agentIds)) : fc.uuid();
  return [
    {
      name: "GET network",
      method: "GET",
      path: "/agent/v1/network",
      credentials: "agent",
      refusal: "envelope",
      readOnly: true,
    },
    {
      name: "GET balance",
      method: "GET",
      path: "/agent/v1/balance",
      credentials: "agent",
      refusal: "envelope",
      readOnly: true,
    },
    {
      name: "GET actions/:id",
      method: "GET",
      path: uuidish.map((id) => `/agent/v1/actions/${id}`),
      credentials: "agent",
      refusal: "envelope",
      readOnly: true,
    },
    {
      name: "POST rpc",
      method: "POST",
      path: "/agent/v1/rpc",
      credentials: "agent",
      body: {
        valid: fc.oneof(rpcCall, fc.array(rpcCall, { minLength: 0, maxLength: 120 })),
        maxBytes: RPC_MAX_BATCH_BYTES,
      },
      refusal: "jsonrpc",
      readOnly: true,
    },
    {
      name: "POST faucet",
      method: "POST",
      path: "/agent/v1/faucet",
      credentials: "agent",
      body: { valid: fromSchema(faucetRequestSchema), maxBytes: 4_096 },
      refusal: "envelope",
      readOnly: false,
      refusalMayRecord: ["failed_action"],
    },
    {
      name: "POST transfers",
      method: "POST",
      path: "/agent/v1/transfers",
      credentials: "agent",
      body: {
        valid: fromSchema(transferRequestSchema, { to: lowercaseAddress }),
        maxBytes: 4_096,
      },
      refusal: "envelope",
      readOnly: false,
      refusalMayRecord: ["failed_action"],
    },
    {
      name: "POST x402/authorize",
      method: "POST",
      path: "/agent/v1/x402/authorize",
      credentials: "agent",
      body: {
        // Quotes from the schema (mostly refused) and quotes of this node's terms (signed).
        valid: fc.oneof(
          fromSchema(x402AuthorizeRequestSchema),
          fromSchema(x402AuthorizeRequestSchema, { payment_required: payableQuotes }),
        ),
        maxBytes: 32 * 1024,
      },
      refusal: "envelope",
      readOnly: false,
      refusalMayRecord: ["failed_action"],
    },
    {
      name: "POST register",
      method: "POST",
      path: "/agent/v1/register",
      credentials: "registration",
      body: {
        valid: fc.oneof({ weight: 3, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: anyJson }),
        maxBytes: 1_024,
      },
      refusal: "envelope",
      readOnly: false,
      allowed5xx: ["registration_unavailable"],
      refusalMayRecord: ["registration_attempt"],
    },
    {
      name: "GET x402/demo",
      method: "GET",
      path: "/x402/demo",
      credentials: "payment",
      refusal: "x402_resource",
      readOnly: false,
    },
    {
      name: "GET x402/facilitator/supported",
      method: "GET",
      path: "/x402/facilitator/supported",
      credentials: "none",
      refusal: "envelope",
      readOnly: true,
    },
    {
      name: "POST x402/facilitator/verify",
      method: "POST",
      path: "/x402/facilitator/verify",
      credentials: "none",
      body: { valid: facilitatorBodies, maxBytes: 4_096 },
      refusal: "x402_verify",
      readOnly: true,
    },
    {
      name: "POST x402/facilitator/settle",
      method: "POST",
      path: "/x402/facilitator/settle",
      credentials: "none",
      body: { valid: facilitatorBodies, maxBytes: 4_096 },
      refusal: "x402_settle",
      readOnly: false,
    },
    {
      name: "GET admin registration",
      method: "GET",
      path: "/admin/agents/registration",
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      name: "GET admin operations",
      method: "GET",
      path: "/admin/agents/operations",
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      name: "GET admin audit",
      method: "GET",
      path: "/admin/agents/audit",
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      name: "GET metrics",
      method: "GET",
      path: "/metrics",
      credentials: "metrics_scrape",
      refusal: "envelope",
      readOnly: true,
    },
    {
      name: "POST admin settings",
      method: "POST",
      path: "/admin/agents/registration/settings",
      credentials: "admin_change",
      body: { valid: fromSchema(settingsChangeRequestSchema, { changes: settingsChanges }), maxBytes: 4_096 },
      refusal: "envelope",
      readOnly: false,
    },
    {
      name: "POST admin identity",
      method: "POST",
      path: "/admin/agents/registration/identity",
      credentials: "admin_change",
      body: { valid: fromSchema(identityChangeRequestSchema, { agent_id: agentId }), maxBytes: 4_096 },
      refusal: "envelope",
      readOnly: false,
    },
  ];
}
