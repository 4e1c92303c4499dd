/**
 * The routes the fuzz suite covers. Each route's method, path and body schema come from its
 * descriptor in origin/openapi/operations.ts (the one the router and the OpenAPI document use);
 * this table adds what only the fuzz needs, by operationId: its credentials, the shape of its
 * refusals, arbitraries for what a schema cannot say (checksummed addresses, known ids), its body
 * limit. Every descriptor is either fuzzed here or named in NOT_FUZZED with the reason, so a new
 * route cannot be left out silently. A new credential or refusal shape is one case in requests.ts
 * or refusals.ts.
 */
import fc from "fast-check";
import type * as z from "zod";
import { OPERATIONS, type Operation } from "../../origin/openapi/operations.ts";
import { settingsSchema } from "../../shared/console-schemas.ts";
import { RPC_MAX_BATCH_BYTES, RPC_READ_ALLOWLIST } from "../../shared/constants.ts";
import type { ErrorCode } from "../../shared/error-codes.ts";
import { EVENT_TYPES } from "../../shared/event-types.ts";
import { anyJson, hostileString } from "./hostile.ts";
import { queryStrings } from "./query.ts";
import { facilitatorBodies, fuzzRequirement, payableQuotes } from "./x402-payments.ts";
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
 * The wire format of the route's refusals (the gateway's envelope, JSON-RPC's error, or x402's
 * own); x402's differs by surface: the resource's 402 quote with a reason, and the facilitator's
 * verify and settle data.
 */
export type RefusalShape = "envelope" | "jsonrpc" | "x402_resource" | "x402_verify" | "x402_settle";

export type FuzzRoute = {
  name: string;
  method: "GET" | "POST" | "PATCH";
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
   * What a refusal may record: an admitted registration attempt
   * (docs/api.md#registration-quotas-and-counters), or the idempotency record of a money action
   * refused after its claim (a `failed` action with the refusal's code, so a repeat of the key
   * answers the same).
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

const withoutId = ({ id: _id, ...call }: Record<string, unknown>): Record<string, unknown> => call;

/** A 32-byte hex word, well formed or not (a transaction hash, an authorization's nonce). */
const hexWordish = fc.oneof(
  fc.uint8Array({ minLength: 32, maxLength: 32 }).map((bytes) => `0x${Buffer.from(bytes).toString("hex")}`),
  fc.string().map(encodeURIComponent),
  fc.constantFrom("0x", `0x${"0".repeat(63)}`, `0x${"G".repeat(64)}`, "%2e%2e", "%00"),
);

/** A payer and a nonce, well formed or not, as `{payer}/{nonce}` fill a path. */
const payerNonceish = fc
  .tuple(
    fc.oneof(
      fc
        .uint8Array({ minLength: 20, maxLength: 20 })
        .map((bytes) => `0x${Buffer.from(bytes).toString("hex")}`),
      fc.string().map(encodeURIComponent),
      fc.constantFrom("tx", "%2e%2e", `0x${"F".repeat(40)}`),
    ),
    hexWordish,
  )
  .map(([payer, nonce]) => `${payer}/${nonce}`);

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

/**
 * A WebAuthn assertion as startAuthentication answers it (AuthenticationResponseJSON), its fields
 * well formed or hostile: the sign-in looks its credential id up before anything verifies it.
 */
const assertionish = fc.oneof(
  anyJson,
  fc.record(
    {
      id: fc.oneof(
        fc.base64String().map((text) => text.replace(/=+$/, "")),
        hostileString,
        anyJson,
      ),
      rawId: fc.oneof(fc.base64String(), hostileString),
      type: fc.constantFrom("public-key", "", "webauthn.get"),
      response: fc.record(
        {
          clientDataJSON: fc.oneof(fc.base64String(), hostileString, anyJson),
          authenticatorData: fc.oneof(fc.base64String(), hostileString),
          signature: fc.oneof(fc.base64String(), hostileString),
          userHandle: fc.oneof(fc.base64String(), fc.constant(null)),
        },
        { requiredKeys: [] },
      ),
      clientExtensionResults: fc.oneof(fc.constant({}), anyJson),
      authenticatorAttachment: fc.constantFrom("platform", "cross-platform"),
    },
    { requiredKeys: [] },
  ),
);

/** Ids the stack knows, so some fuzzed references hit real rows. */
export type KnownIds = { agentIds: string[]; wallets: string[]; webhookIds: string[] };

/** What the fuzz adds to a route's descriptor; the method, the path and the body schema are the descriptor's. */
type FuzzFacts = Omit<FuzzRoute, "method" | "path" | "body"> & {
  operationId: string;
  /** For a path with parameters (one, or a run such as `{payer}/{nonce}`): the values they take. */
  param?: fc.Arbitrary<string>;
  /**
   * Values for the descriptor's query parameters that their specs cannot say (a search's words, a
   * known id), by name; beside them every declared parameter gets generated ones (query.ts).
   */
  query?: Record<string, fc.Arbitrary<string>>;
  /**
   * The body: from the descriptor's request schema, with `fields` overriding top-level fields, or
   * `valid` given the schema (bodies the schema cannot describe: JSON-RPC, x402's own shapes).
   */
  body?: {
    maxBytes: number;
    fields?: Record<string, fc.Arbitrary<unknown>>;
    valid?: (schema: z.ZodType | undefined) => fc.Arbitrary<unknown>;
  };
};

/** Descriptors the fuzz leaves alone, and why. */
const NOT_FUZZED: Record<string, string> = {
  getOpenApi: "a constant document: no parameter, no body, no state",
  consoleOpenApi: "a constant document: no parameter, no body, no state",
  consolePage: "a static page: no parameter, no body, no state",
  consoleScript: "a static asset",
  consoleStyle: "a static asset",
  consoleScriptWidgets: "a static asset",
  consoleScriptRouter: "a static asset",
  consoleScriptPages: "a static asset",
  consoleScriptCharts: "a static asset",
  consoleScriptPasskeys: "a static asset",
  consoleScriptApprovals: "a static asset",
  consoleScriptSimplewebauthnBrowser: "a static asset",
  health: "private, no parameter, no body, no state; probed by health.int.test.ts",
  streamEvents:
    "a success is a stream that never ends, which the fuzz's requests read to the end; its one parameter (the last event id, by header or query) and its refusals are attacked by origin/events/events.int.test.ts › resumes after Last-Event-ID or ?after=, refuses an unknown id, and after=0 replays what is kept",
  webhookKeys: "a constant document: no parameter, no body, no state",
  consolePasskeyRegistrationOptions:
    "the passkey ceremony; its bodies and refusals are attacked by origin/passkeys/passkeys.int.test.ts",
  consolePasskeyRegistration:
    "the passkey ceremony; its bodies and refusals are attacked by origin/passkeys/passkeys.int.test.ts",
  consoleApprovalOptions: "the approval relay; attacked by origin/passkeys/passkeys.int.test.ts",
  consoleApproval: "the approval relay; attacked by origin/passkeys/passkeys.int.test.ts",
  consoleSignOut:
    "a DELETE whose success ends the session it is sent with (none in the fuzz: its credentials are the tokens); attacked by origin/console/console-session.int.test.ts",
  consoleSignOutEverywhere:
    "a success ends the sessions of the operator it is sent as (none in the fuzz: its credentials are the tokens); attacked by origin/console/console-session.int.test.ts",
  rotateToken:
    "a success replaces the token every other fuzzed route's requests carry; its body is exactly {} and its refusals are the gateway's; attacked by origin/gateway/token-rotation.int.test.ts",
};

function requestSchema(operation: Operation): z.ZodType | undefined {
  const request = operation.requestBody;
  return request && "schema" in request ? request.schema : undefined;
}

function fuzzRoute(facts: FuzzFacts): FuzzRoute {
  const operation = OPERATIONS.find((candidate) => candidate.operationId === facts.operationId);
  if (!operation) throw new Error(`the fuzz table names ${facts.operationId}, which has no route descriptor`);
  const { operationId: _, param, query, body, ...route } = facts;
  // A value fills the path's run of parameters: `{payer}/{nonce}` takes one `payer/nonce`.
  const bare = param
    ? param.map((value) => operation.path.replace(/\{[a-z_]+\}(?:\/\{[a-z_]+\})*/, value))
    : operation.path;
  const path = operation.query?.length
    ? fc
        .tuple(typeof bare === "string" ? fc.constant(bare) : bare, queryStrings(operation.query, query))
        .map(([pathPart, queryPart]) => `${pathPart}${queryPart}`)
    : bare;
  const schema = requestSchema(operation);
  const valid = body?.valid ? body.valid(schema) : schema ? fromSchema(schema, body?.fields) : undefined;
  if (body && !valid) throw new Error(`${facts.operationId}: a body with neither a schema nor arbitraries`);
  return {
    ...route,
    method: operation.method.toUpperCase() as "GET" | "POST" | "PATCH",
    path,
    ...(body && valid ? { body: { valid, maxBytes: body.maxBytes } } : {}),
  };
}

export function fuzzRoutes(known: KnownIds): FuzzRoute[] {
  const agentId = known.agentIds.length ? fc.oneof(fc.uuid(), fc.constantFrom(...known.agentIds)) : fc.uuid();
  const webhookId = known.webhookIds.length
    ? fc.oneof(uuidish, fc.constantFrom(...known.webhookIds))
    : uuidish;
  const wallet = known.wallets.length
    ? fc.oneof(
        lowercaseAddress,
        fc.constantFrom(...known.wallets).map((address) => address.toUpperCase()),
      )
    : lowercaseAddress;
  // A page cursor as the console writes one (a row's time to the microsecond and its id), from the
  // first year the database holds to the last four-digit one: the page's query runs with it.
  const pageCursor = fc
    .tuple(
      fc.date({
        min: new Date("0001-01-01T00:00:00Z"),
        max: new Date("9999-12-31T23:59:59Z"),
        noInvalidDate: true,
      }),
      fc.integer({ min: 0, max: 999 }),
      fc.uuid(),
    )
    .map(([at, micros, id]) => `${at.toISOString().slice(0, -1)}${String(micros).padStart(3, "0")}Z_${id}`);
  // What the console's search takes (an id, a wallet, a transaction hash, an idempotency key).
  const searchTerm = fc.oneof(agentId, wallet, hexWordish, fc.string({ minLength: 1, maxLength: 40 }));
  // Words of the discovery catalogue's entries (the demo's URL, description and MIME type).
  const catalogueWords = fc
    .array(fc.constantFrom("demo", "x402", "json", "application/json", "paid", "http", "Resource", "77"), {
      minLength: 1,
      maxLength: 9,
    })
    .map((words) => words.join(" "));
  // The node's own terms, which every catalogue entry carries: a filter of them keeps the entries.
  const catalogueFilters = {
    type: fc.constant("http"),
    scheme: fc.constant(fuzzRequirement.scheme),
    network: fc.constant(fuzzRequirement.network),
    payTo: fc.constantFrom(fuzzRequirement.payTo, fuzzRequirement.payTo.toUpperCase().replace("0X", "0x")),
  };
  const table: FuzzFacts[] = [
    {
      operationId: "getNetwork",
      name: "GET network",
      credentials: "agent",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "getBalance",
      name: "GET balance",
      credentials: "agent",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "getAction",
      name: "GET actions/:id",
      param: uuidish,
      credentials: "agent",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "getPolicy",
      name: "GET policy",
      credentials: "agent",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "checkPolicy",
      name: "POST policy/check",
      credentials: "agent",
      body: {
        // Transfers from the schema; x402 quotes of this node's terms (the schema's own are refused).
        valid: (schema) =>
          fc.oneof(
            fromSchema(schema!),
            payableQuotes.map((quote) => ({ x402: { payment_required: quote } })),
          ),
        maxBytes: 64 * 1024,
      },
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "patchPolicy",
      name: "PATCH policy",
      credentials: "agent",
      // Merge patches of the document: any JSON object, and patches of its real fields.
      body: {
        valid: () =>
          fc.oneof(
            anyJson,
            fc.record(
              {
                transfers: fc.record(
                  {
                    per_tx_units: fc.oneof(
                      fc.constant(null),
                      fc.bigInt({ min: 0n, max: 10n ** 12n }).map(String),
                    ),
                  },
                  { requiredKeys: [] },
                ),
                frozen: fc.oneof(fc.boolean(), fc.constant(null)),
              },
              { requiredKeys: [] },
            ),
          ),
        maxBytes: 128 * 1024,
      },
      refusal: "envelope",
      readOnly: false,
    },
    {
      operationId: "rpc",
      name: "POST rpc",
      credentials: "agent",
      body: {
        valid: () =>
          fc.oneof(
            rpcCall,
            fc.array(rpcCall, { minLength: 0, maxLength: 120 }),
            // Notifications only, which JSON-RPC 2.0 answers with nothing.
            fc.array(rpcCall.map(withoutId), { minLength: 1, maxLength: 4 }),
          ),
        maxBytes: RPC_MAX_BATCH_BYTES,
      },
      refusal: "jsonrpc",
      readOnly: true,
    },
    {
      operationId: "faucet",
      name: "POST faucet",
      credentials: "agent",
      body: { maxBytes: 4_096 },
      refusal: "envelope",
      readOnly: false,
      refusalMayRecord: ["failed_action"],
    },
    {
      operationId: "transfer",
      name: "POST transfers",
      credentials: "agent",
      body: { fields: { to: lowercaseAddress }, maxBytes: 4_096 },
      refusal: "envelope",
      readOnly: false,
      refusalMayRecord: ["failed_action"],
    },
    {
      operationId: "authorizeX402",
      name: "POST x402/authorize",
      credentials: "agent",
      body: {
        // Quotes from the schema (mostly refused) and quotes of this node's terms (signed).
        valid: (schema) =>
          fc.oneof(fromSchema(schema!), fromSchema(schema!, { payment_required: payableQuotes })),
        maxBytes: 32 * 1024,
      },
      refusal: "envelope",
      readOnly: false,
      refusalMayRecord: ["failed_action"],
    },
    {
      operationId: "register",
      name: "POST register",
      credentials: "registration",
      body: {
        valid: () => fc.oneof({ weight: 3, arbitrary: fc.constant({}) }, { weight: 1, arbitrary: anyJson }),
        maxBytes: 1_024,
      },
      refusal: "envelope",
      readOnly: false,
      allowed5xx: ["registration_unavailable"],
      refusalMayRecord: ["registration_attempt"],
    },
    {
      operationId: "x402Demo",
      name: "GET x402/demo",
      credentials: "payment",
      refusal: "x402_resource",
      readOnly: false,
    },
    {
      operationId: "x402Supported",
      name: "GET x402/facilitator/supported",
      credentials: "none",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "x402SettlementByTransaction",
      name: "GET x402/facilitator/settlements/tx/:hash",
      param: hexWordish,
      credentials: "none",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "x402SettlementByPayment",
      name: "GET x402/facilitator/settlements/:payer/:nonce",
      param: payerNonceish,
      credentials: "none",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "x402Verify",
      name: "POST x402/facilitator/verify",
      credentials: "none",
      body: { valid: () => facilitatorBodies, maxBytes: 4_096 },
      refusal: "x402_verify",
      readOnly: true,
    },
    {
      operationId: "x402Settle",
      name: "POST x402/facilitator/settle",
      credentials: "none",
      body: { valid: () => facilitatorBodies, maxBytes: 4_096 },
      refusal: "x402_settle",
      readOnly: false,
    },
    {
      operationId: "x402DiscoveryResources",
      name: "GET x402/facilitator/discovery/resources",
      query: catalogueFilters,
      credentials: "none",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "x402DiscoverySearch",
      name: "GET x402/facilitator/discovery/search",
      query: { query: catalogueWords, ...catalogueFilters },
      credentials: "none",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleRegistration",
      name: "GET admin registration",
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleOperations",
      name: "GET admin operations",
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleAudit",
      name: "GET admin audit",
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleSearch",
      name: "GET admin search",
      query: { q: searchTerm },
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleIdentities",
      name: "GET admin identities",
      query: { cursor: pageCursor },
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleAgent",
      name: "GET admin identities/:id",
      param: agentId,
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleActions",
      name: "GET admin actions",
      query: { agent_id: agentId, cursor: pageCursor },
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleAction",
      name: "GET admin actions/:id",
      param: uuidish,
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleSettlements",
      name: "GET admin settlements",
      query: { cursor: pageCursor },
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleSettlement",
      name: "GET admin settlements/:id",
      param: uuidish,
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleCharts",
      name: "GET admin overview charts",
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleSession",
      name: "GET admin session",
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      // No credential, no body: the options of a sign-in, kept in the origin's memory only.
      operationId: "consoleSessionOptions",
      name: "POST admin session/options",
      credentials: "none",
      refusal: "envelope",
      readOnly: true,
    },
    {
      // No credential: an assertion, refused (the stack enrolls no passkey). Each refusal counts a
      // failed authentication against the case's own loopback address, never the suite's.
      operationId: "consoleSignIn",
      name: "POST admin session",
      credentials: "none",
      body: { maxBytes: 16_384, fields: { response: assertionish } },
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consolePasskeys",
      name: "GET admin passkeys",
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "metrics",
      name: "GET metrics",
      credentials: "metrics_scrape",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleChangeSettings",
      name: "POST admin settings",
      credentials: "admin_change",
      body: { fields: { changes: settingsChanges }, maxBytes: 4_096 },
      refusal: "envelope",
      readOnly: false,
    },
    {
      // Its successes may revoke a known agent, for good: it stays after every route an agent's
      // token runs.
      operationId: "consoleChangeIdentity",
      name: "POST admin identity",
      credentials: "admin_change",
      body: { fields: { agent_id: agentId }, maxBytes: 4_096 },
      refusal: "envelope",
      readOnly: false,
    },
    {
      operationId: "consoleWebhooks",
      name: "GET admin webhooks",
      credentials: "admin_read",
      refusal: "envelope",
      readOnly: true,
    },
    {
      operationId: "consoleAddWebhook",
      name: "POST admin webhooks",
      credentials: "admin_change",
      // Real event types and URLs the guard takes (a public address, no lookup) or refuses.
      body: {
        maxBytes: 4_096,
        fields: {
          url: fc.oneof(
            fc.constantFrom("https://93.184.216.34/fuzz", "http://127.0.0.1:9/fuzz", "https://[::1]/x"),
            fc.webUrl(),
            hostileString,
          ),
          events: fc.oneof(
            fc.subarray([...EVENT_TYPES], { minLength: 1 }),
            fc.array(fc.oneof(fc.constantFrom(...EVENT_TYPES), hostileString), { maxLength: 4 }),
          ),
        },
      },
      refusal: "envelope",
      readOnly: false,
    },
    {
      // The fuzz stack registers no passkey: every request is refused (404 or 400) or answered
      // feature_disabled, and the revoke itself is attacked by origin/passkeys/revoke.int.test.ts.
      operationId: "consolePasskeyRevoke",
      name: "POST admin passkeys/:key_id/revoke",
      param: fc.oneof(fc.constantFrom("pk-0123456789abcdef", "alice-passkey"), fc.string({ maxLength: 80 })),
      credentials: "admin_change",
      body: { maxBytes: 4_096 },
      refusal: "envelope",
      readOnly: false,
    },
    {
      // Before remove, whose successes may take the known endpoint away.
      operationId: "consoleReplayWebhook",
      name: "POST admin webhooks/:id/replay",
      param: webhookId,
      credentials: "admin_change",
      body: { maxBytes: 4_096 },
      refusal: "envelope",
      readOnly: false,
    },
    {
      // Before remove too; each success shows a new secret in its answer alone.
      operationId: "consoleRotateWebhookSecret",
      name: "POST admin webhooks/:id/rotate-secret",
      param: webhookId,
      credentials: "admin_change",
      body: { maxBytes: 4_096 },
      refusal: "envelope",
      readOnly: false,
    },
    {
      operationId: "consoleRemoveWebhook",
      name: "POST admin webhooks/:id/remove",
      param: webhookId,
      credentials: "admin_change",
      body: { maxBytes: 4_096 },
      refusal: "envelope",
      readOnly: false,
    },
  ];
  const covered = new Set([...table.map((facts) => facts.operationId), ...Object.keys(NOT_FUZZED)]);
  const missed = OPERATIONS.filter((operation) => !covered.has(operation.operationId));
  if (missed.length > 0)
    throw new Error(
      `routes neither fuzzed nor in NOT_FUZZED: ${missed.map((operation) => operation.operationId).join(", ")}`,
    );
  return table.map(fuzzRoute);
}
