/**
 * Wire schemas of the console's browsing routes (docs/api.md#the-operator-console): search, the
 * paged lists of identities, actions and settlements, one agent's page, one action and one
 * settlement. Read only. Runtime-neutral: the routes validate their queries with them, the tests
 * check answers against them and the OpenAPI document names them.
 */
import * as z from "zod";
import { hasControlCharacter } from "./control-characters.ts";
import { UUID_SOURCE } from "./uuid.ts";

const timestamp = z.string().describe("ISO 8601, UTC");
const count = z.number().int().nonnegative();
const units = z.string().describe("a whole number of 6-decimal units, as a string");

/** GET {base}/admin/agents/search?q=: an agent id, a wallet, a transaction hash, an action id or an idempotency key. */
export const searchQuerySchema = z.strictObject({
  q: z
    .string({
      error: "q must be given: an agent id, a wallet, a transaction hash, an action id or an idempotency key",
    })
    .trim()
    .min(1, "q must not be empty")
    .max(128, "q must be at most 128 characters")
    .refine((value) => !hasControlCharacter(value), "q must not hold control characters"),
});

export const SEARCH_MATCH_KINDS = ["agent", "action", "settlement"] as const;

export const searchResultSchema = z.object({
  query: z.string(),
  /** What the query was read as: `uuid`, `wallet`, `tx_hash` or `idempotency_key`. */
  read_as: z.enum(["uuid", "wallet", "tx_hash", "idempotency_key"]),
  /** At most 20, the page opens the one match itself. */
  matches: z.array(
    z.object({
      kind: z.enum(SEARCH_MATCH_KINDS),
      id: z.string(),
      /** What matched, in words: "wallet of agent …", "transfer's transaction", … */
      label: z.string(),
    }),
  ),
});
export type SearchResult = z.infer<typeof searchResultSchema>;

/** A page's cursor: the last row's time (UTC, to the microsecond) and id, as the previous answer gave it. */
export const CURSOR_PATTERN = new RegExp(
  `^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{6}Z_${UUID_SOURCE}$`,
);

/**
 * Whether a cursor of CURSOR_PATTERN's shape names a time the database can read: the shape alone
 * lets through a 13th month, a 30 February, a 25th hour or the year 0, which no row has and which
 * would fail the page's query rather than be refused as a bad parameter.
 */
function namesRealTime(cursor: string): boolean {
  const [year, month, day, hour, minute, second] = (cursor.match(/\d+/g) ?? []).slice(0, 6).map(Number);
  if (year === undefined || month === undefined || day === undefined) return false;
  const date = new Date(0);
  date.setUTCFullYear(year, month - 1, day);
  return (
    year >= 1 &&
    date.getUTCMonth() === month - 1 &&
    date.getUTCDate() === day &&
    Number(hour) < 24 &&
    Number(minute) < 60 &&
    Number(second) < 60
  );
}

const CURSOR_MESSAGE = "cursor must be a next_cursor this API answered";

/** ?limit= (1 to 100, 50 by default) and ?cursor= (the previous page's next_cursor). */
export const pageQuerySchema = z.object({
  limit: z
    .string()
    .regex(/^\d{1,3}$/, "limit must be a whole number from 1 to 100")
    .transform(Number)
    .refine((value) => value >= 1 && value <= 100, "limit must be a whole number from 1 to 100")
    .optional(),
  cursor: z.string().regex(CURSOR_PATTERN, CURSOR_MESSAGE).refine(namesRealTime, CURSOR_MESSAGE).optional(),
});

const page = <T extends z.ZodType>(item: T) =>
  z.object({
    items: z.array(item),
    /** Null on the last page; else the value for ?cursor= to read the next one. */
    next_cursor: z.string().nullable(),
  });

export const identityRowSchema = z.object({
  agent_id: z.string(),
  assigned_wallet: z.string(),
  origin: z.string(),
  capabilities: z.array(z.string()),
  enabled: z.boolean(),
  revoked: z.boolean(),
  disabled_reason: z.string().nullable(),
  created_at: timestamp,
  last_verified_at: timestamp.nullable(),
});
export const identityPageSchema = page(identityRowSchema);
export type IdentityPage = z.infer<typeof identityPageSchema>;

/** An action as the console shows it: its state, and for a refusal why, under which rule, with the stored message. */
export const actionRowSchema = z.object({
  action_id: z.string(),
  agent_id: z.string(),
  kind: z.string(),
  idempotency_key: z.string(),
  status: z.string(),
  amount: units.nullable(),
  to: z.string().nullable(),
  tx_hash: z.string().nullable(),
  error_code: z.string().nullable(),
  /** Why it was refused or failed, as the agent was told (a limit's refusal names the limit and what remained). */
  error_message: z.string().nullable(),
  /** The policy rule that held or refused it. */
  rule: z.string().nullable(),
  /** For a policy refusal, what remained of that rule's budget, when it was stored. */
  remaining: units.nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});
export const actionPageSchema = page(actionRowSchema);
export type ActionRow = z.infer<typeof actionRowSchema>;
export type ActionPage = z.infer<typeof actionPageSchema>;

export const settlementRowSchema = z.object({
  id: z.string(),
  payer: z.string(),
  pay_to: z.string(),
  amount: units,
  status: z.string(),
  tx_hash: z.string().nullable(),
  error_reason: z.string().nullable(),
  resource_url: z.string().nullable(),
  /** The agent whose wallet paid, when the payer is one of this node's agents. */
  agent_id: z.string().nullable(),
  created_at: timestamp,
  updated_at: timestamp,
});
export const settlementPageSchema = page(settlementRowSchema);
export type SettlementRow = z.infer<typeof settlementRowSchema>;
export type SettlementPage = z.infer<typeof settlementPageSchema>;

/** GET {base}/admin/agents/agents/{agent_id}: one agent, as the console's agent page shows it. */
export const agentDetailSchema = z.object({
  generated_at: timestamp,
  identity: identityRowSchema,
  findings: z.array(
    z.object({ class: z.string(), code: z.string(), detail: z.string().nullable(), at: timestamp }),
  ),
  /** Read from the chain now; null with the reason when it did not answer. */
  balance: z.union([
    z.object({ units, wei: z.string(), block_number: z.string() }),
    z.object({ unavailable: z.string() }),
  ]),
  /** The agent's sealed policy (null: the node's limits only) and each budget's use today. */
  policy: z.object({
    document: z.record(z.string(), z.unknown()).nullable(),
    version: z.number().int().nullable(),
    node_frozen: z.boolean(),
    budgets: z.array(
      z.object({ rule: z.string(), limit: units, used: units, remaining: units, resets_at: timestamp }),
    ),
  }),
  /** The key's batch and whether a restore drill into a new enclave reproduced it. */
  key: z.object({
    batch_id: z.string().nullable(),
    batch_status: z.string().nullable(),
    drilled: z.boolean(),
  }),
  /** The first page of its actions (transfers, faucet payouts, x402 authorizations), newest first. */
  actions: actionPageSchema,
  /** Counts by kind and state, all time. */
  action_counts: z.array(z.object({ kind: z.string(), state: z.string(), count })),
});
export type AgentDetail = z.infer<typeof agentDetailSchema>;
