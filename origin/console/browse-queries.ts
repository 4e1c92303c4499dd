import { type SQL, sql } from "drizzle-orm";
import type { ActionStatus } from "../../shared/action-status.ts";
import type {
  ActionPage,
  ActionRow,
  IdentityPage,
  SearchResult,
  SettlementPage,
  SettlementRow,
} from "../../shared/console-browse-schemas.ts";
import { isUuid } from "../../shared/uuid.ts";
import { type Db, queryRows } from "../db/client.ts";

/**
 * The console's browsing reads (docs/api.md#the-operator-console): paged lists, newest first, with
 * a keyset cursor (the last row's time and id), so a page costs the same however deep it is and a
 * row written meanwhile never shifts the next page.
 */

const iso = (value: Date | string): string => new Date(value).toISOString();

export type PageRequest = { limit: number; cursor?: string };

/** The cursor's time and id: `<ISO time, microseconds>_<uuid>` (CURSOR_PATTERN has checked its shape). */
function cursorParts(cursor: string): { at: string; id: string } {
  const split = cursor.lastIndexOf("_");
  return { at: cursor.slice(0, split), id: cursor.slice(split + 1) };
}

/**
 * A row's place in the order, as the database holds it: to the microsecond (a Date keeps only
 * milliseconds, and a cursor cut to them would skip the rows written later in the same millisecond).
 */
const cursorOf = (timeColumn: SQL, idColumn: SQL): SQL =>
  sql`to_char(${timeColumn} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') || '_' || ${idColumn}::text as cursor`;

/** One more row than asked for tells whether a next page exists. */
function paged<T extends { cursor: string }>(rows: T[], limit: number) {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, next_cursor: rows.length > limit && last ? last.cursor : null };
}

/** `(time, id) < (cursor)` for the newest-first order, or no bound on the first page. */
function before(timeColumn: SQL, idColumn: SQL, cursor: string | undefined): SQL {
  if (!cursor) return sql`true`;
  const { at, id } = cursorParts(cursor);
  return sql`(${timeColumn}, ${idColumn}) < (${at}::timestamptz, ${id}::uuid)`;
}

type IdentityDbRow = {
  agent_id: string;
  assigned_wallet: string;
  origin: string;
  capabilities: string[];
  enabled: boolean;
  revoked: boolean;
  disabled_reason: string | null;
  created_at: Date;
  last_verified_at: Date | null;
};

const identityView = ({
  cursor: _,
  ...row
}: IdentityDbRow & { cursor?: string }): IdentityPage["items"][number] => ({
  ...row,
  created_at: iso(row.created_at),
  last_verified_at: row.last_verified_at ? iso(row.last_verified_at) : null,
});

const IDENTITY_COLUMNS = sql`agent_id, assigned_wallet, origin, capabilities, enabled, revoked, disabled_reason,
  created_at, last_verified_at`;

export async function readIdentityPage(db: Db, page: PageRequest): Promise<IdentityPage> {
  const rows = await queryRows<IdentityDbRow & { cursor: string }>(
    db,
    sql`select ${IDENTITY_COLUMNS}, ${cursorOf(sql`created_at`, sql`agent_id`)} from agent_identities
        where ${before(sql`created_at`, sql`agent_id`, page.cursor)}
        order by created_at desc, agent_id desc limit ${page.limit + 1}`,
  );
  const result = paged(rows, page.limit);
  return { items: result.items.map(identityView), next_cursor: result.next_cursor };
}

export async function readIdentity(db: Db, agentId: string): Promise<IdentityPage["items"][number] | null> {
  const [row] = await queryRows<IdentityDbRow>(
    db,
    sql`select ${IDENTITY_COLUMNS} from agent_identities where agent_id = ${agentId}::uuid`,
  );
  return row ? identityView(row) : null;
}

type ActionDbRow = {
  action_id: string;
  agent_id: string;
  kind: string;
  idempotency_key: string;
  status: string;
  amount: string | null;
  to_address: string | null;
  tx_hash: string | null;
  error_code: string | null;
  error_message: string | null;
  hold_rule: string | null;
  remaining: string | null;
  created_at: Date;
  updated_at: Date;
};

// A policy's refusal of an x402 authorization keeps its rule and what remained in signed_payload
// (x402/payer/authorize-repository.ts); a transfer's keeps the rule, its message the figures.
const ACTION_COLUMNS = sql`action_id, agent_id, kind, idempotency_key, status, amount_units::text as amount,
  to_address, tx_hash, error_code, error_message, hold_rule, signed_payload #>> '{denied,remaining}' as remaining,
  created_at, updated_at`;

const actionView = (row: ActionDbRow): ActionRow => ({
  action_id: row.action_id,
  agent_id: row.agent_id,
  kind: row.kind,
  idempotency_key: row.idempotency_key,
  status: row.status,
  amount: row.amount,
  to: row.to_address,
  tx_hash: row.tx_hash,
  error_code: row.error_code,
  error_message: row.error_message,
  rule: row.hold_rule,
  remaining: row.remaining,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

/**
 * Actions newest first (by creation: a page does not move as rows change state), of one agent or
 * all, in one state or any (the approvals page lists the held ones).
 */
export async function readActionPage(
  db: Db,
  page: PageRequest & { agentId?: string | undefined; status?: ActionStatus | undefined },
): Promise<ActionPage> {
  const agent = page.agentId ? sql`agent_id = ${page.agentId}::uuid` : sql`true`;
  const status = page.status ? sql`status = ${page.status}` : sql`true`;
  const rows = await queryRows<ActionDbRow & { cursor: string }>(
    db,
    sql`select ${ACTION_COLUMNS}, ${cursorOf(sql`created_at`, sql`action_id`)} from agent_actions
        where ${agent} and ${status} and ${before(sql`created_at`, sql`action_id`, page.cursor)}
        order by created_at desc, action_id desc limit ${page.limit + 1}`,
  );
  const result = paged(rows, page.limit);
  return { items: result.items.map(actionView), next_cursor: result.next_cursor };
}

export async function readAction(db: Db, actionId: string): Promise<ActionRow | null> {
  const [row] = await queryRows<ActionDbRow>(
    db,
    sql`select ${ACTION_COLUMNS} from agent_actions where action_id = ${actionId}::uuid`,
  );
  return row ? actionView(row) : null;
}

type SettlementDbRow = {
  id: string;
  payer: string;
  pay_to: string;
  amount: string;
  status: string;
  tx_hash: string | null;
  error_reason: string | null;
  resource_url: string | null;
  agent_id: string | null;
  created_at: Date;
  updated_at: Date;
};

const SETTLEMENT_COLUMNS = sql`s.id, s.payer, s.pay_to, s.amount_units::text as amount, s.status, s.tx_hash,
  s.error_reason, s.resource_url, i.agent_id, s.created_at, s.updated_at`;

const settlementView = ({ cursor: _, ...row }: SettlementDbRow & { cursor?: string }): SettlementRow => ({
  ...row,
  created_at: iso(row.created_at),
  updated_at: iso(row.updated_at),
});

export async function readSettlementPage(db: Db, page: PageRequest): Promise<SettlementPage> {
  const rows = await queryRows<SettlementDbRow & { cursor: string }>(
    db,
    sql`select ${SETTLEMENT_COLUMNS}, ${cursorOf(sql`s.created_at`, sql`s.id`)} from x402_settlements s
          left join agent_identities i on i.assigned_wallet = s.payer
        where ${before(sql`s.created_at`, sql`s.id`, page.cursor)}
        order by s.created_at desc, s.id desc limit ${page.limit + 1}`,
  );
  const result = paged(rows, page.limit);
  return { items: result.items.map(settlementView), next_cursor: result.next_cursor };
}

export async function readSettlement(db: Db, id: string): Promise<SettlementRow | null> {
  const [row] = await queryRows<SettlementDbRow>(
    db,
    sql`select ${SETTLEMENT_COLUMNS} from x402_settlements s
          left join agent_identities i on i.assigned_wallet = s.payer
        where s.id = ${id}::uuid`,
  );
  return row ? settlementView(row) : null;
}

const WALLET = /^0x[0-9a-f]{40}$/;
const HASH = /^0x[0-9a-f]{64}$/;
const MAX_MATCHES = 20;

type Match = SearchResult["matches"][number];

/**
 * What a query names, by its shape (and, whatever the shape, the actions it is the idempotency key
 * of): a UUID is an agent, an action or a settlement id; 20 bytes of
 * hex a wallet (an agent's, or a settlement's payer); 32 bytes of hex a transaction (an action's
 * or a settlement's); anything else an idempotency key, which each agent chooses, so it may name
 * several actions (found through agent_actions_idempotency_key_idx, whatever the agent). Exact
 * matches only: each read is one index lookup.
 */
export async function search(db: Db, query: string): Promise<SearchResult> {
  const found = await searchByShape(db, query);
  if (found.read_as === "idempotency_key") return found;
  // Whatever its shape, the query may be an idempotency key as well: each agent chooses its keys,
  // and a UUID (or a hash) is a common choice. Exact, as typed (keys are case-sensitive).
  const seen = new Set(found.matches.map((match) => `${match.kind}:${match.id}`));
  const byKey = (await actionsByIdempotencyKey(db, query)).filter(
    (match) => !seen.has(`${match.kind}:${match.id}`),
  );
  return { ...found, matches: [...found.matches, ...byKey].slice(0, MAX_MATCHES) };
}

/** The actions an idempotency key names, newest first (agent_actions_idempotency_key_idx). */
function actionsByIdempotencyKey(db: Db, key: string): Promise<Match[]> {
  return queryRows<Match>(
    db,
    sql`select 'action' as kind, action_id::text as id, kind || ' action of agent ' || agent_id as label
        from agent_actions where idempotency_key = ${key} order by created_at desc limit ${MAX_MATCHES}`,
  );
}

async function searchByShape(db: Db, query: string): Promise<SearchResult> {
  const lower = query.toLowerCase();
  if (isUuid(lower)) {
    const rows = await queryRows<Match>(
      db,
      sql`select 'agent' as kind, agent_id::text as id, 'agent id' as label from agent_identities
            where agent_id = ${lower}::uuid
          union all
          select 'action', action_id::text, kind || ' action of agent ' || agent_id from agent_actions
            where action_id = ${lower}::uuid
          union all
          select 'settlement', id::text, 'x402 settlement' from x402_settlements where id = ${lower}::uuid`,
    );
    return { query, read_as: "uuid", matches: rows };
  }
  if (WALLET.test(lower)) {
    // An agent's wallet names the agent (its page lists its payments); any other payer's, the x402
    // settlements it paid this node, newest first: a buyer asking about its payment names its wallet.
    const rows = await queryRows<Match>(
      db,
      sql`select 'agent' as kind, agent_id::text as id, 'wallet of agent ' || agent_id as label
            from agent_identities where assigned_wallet = ${lower}
          union all
          (select 'settlement', s.id::text, 'x402 settlement paid by this wallet' from x402_settlements s
            where s.payer = ${lower}
              and not exists (select 1 from agent_identities i where i.assigned_wallet = ${lower})
            order by s.created_at desc, s.id desc limit ${MAX_MATCHES})`,
    );
    return { query, read_as: "wallet", matches: rows };
  }
  if (HASH.test(lower)) {
    const rows = await queryRows<Match>(
      db,
      sql`(select 'action' as kind, a.action_id::text as id, a.kind || ' transaction of agent ' || a.agent_id as label
             from outgoing_transactions t join agent_actions a on a.tx_id = t.tx_id
            where t.tx_hash = ${lower} limit ${MAX_MATCHES})
          union all
          (select 'settlement', s.id::text, 'x402 settlement transaction'
             from outgoing_transactions t join x402_settlements s on s.tx_id = t.tx_id
            where t.tx_hash = ${lower} limit ${MAX_MATCHES})`,
    );
    return { query, read_as: "tx_hash", matches: rows };
  }
  return { query, read_as: "idempotency_key", matches: await actionsByIdempotencyKey(db, query) };
}
