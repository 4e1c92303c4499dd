/**
 * The discovery catalogue's rows (docs/x402.md#discovery-the-resource-catalogue): the operator's
 * registrations (`npm run x402-resources`), the resources of settled payments
 * (catalogue-follower.ts writes those), and the page discovery answers, with the demo added in
 * front while x402 is on.
 */
import { type SQL, sql } from "drizzle-orm";
import { err, ok, type Result } from "../../../shared/result.ts";
import { type Db, queryRows } from "../../db/client.ts";
import type { CatalogueSource } from "../../db/schema/x402-resources.ts";
import { type CatalogueEntry, MAX_REGISTERED_RESOURCES } from "./catalogue-entry.ts";

/** A catalogue row as the operator's `list` and discovery show it. */
export type CatalogueRow = CatalogueEntry & {
  source: CatalogueSource | "demo";
  createdAt: string;
  updatedAt: string;
};

type Row = {
  url: string;
  description: string;
  mime_type: string | null;
  source: CatalogueSource | "demo";
  created_at: string;
  updated_at: string;
};

const rowOf = (row: Row): CatalogueRow => ({
  url: row.url,
  description: row.description,
  mimeType: row.mime_type,
  source: row.source,
  createdAt: row.created_at,
  updatedAt: row.updated_at,
});

const COLUMNS = sql`url, description, mime_type, source, js_iso_timestamp(created_at) as created_at,
  js_iso_timestamp(updated_at) as updated_at`;

export type AddResourceResult = Result<CatalogueRow, { code: "catalogue_full"; max: number }>;

/** Serializes the operator's adds (an arbitrary constant); settlements never take it. */
const ADD_LOCK_KEY = 7_700_402;

/**
 * Registers a resource, or replaces the description and MIME type of one already listed (a
 * settled one becomes the operator's). Refused when MAX_REGISTERED_RESOURCES are registered
 * already and this URL is not one of them.
 */
export async function addResource(db: Db, entry: CatalogueEntry): Promise<AddResourceResult> {
  return db.transaction(async (tx): Promise<AddResourceResult> => {
    // One add at a time, so two at once cannot both take the last place.
    await tx.execute(sql`select pg_advisory_xact_lock(${ADD_LOCK_KEY})`);
    const [count] = await queryRows<{ registered: number; this_one: boolean | null }>(
      tx,
      sql`select count(*)::int as registered, bool_or(url = ${entry.url}) as this_one
          from x402_resources where source = 'operator'`,
    );
    if (count && count.registered >= MAX_REGISTERED_RESOURCES && count.this_one !== true) {
      return err({ code: "catalogue_full", max: MAX_REGISTERED_RESOURCES });
    }
    const [row] = await queryRows<Row>(
      tx,
      sql`insert into x402_resources (url, description, mime_type, source)
          values (${entry.url}, ${entry.description}, ${entry.mimeType}, 'operator')
          on conflict (url) do update set description = excluded.description,
            mime_type = excluded.mime_type, source = 'operator', updated_at = now()
          returning ${COLUMNS}`,
    );
    return ok(rowOf(row!));
  });
}

/** Every catalogue row, oldest first (the demo is not a row). */
export async function listResources(db: Db): Promise<CatalogueRow[]> {
  const rows = await queryRows<Row>(db, sql`select ${COLUMNS} from x402_resources order by created_at, url`);
  return rows.map(rowOf);
}

/**
 * Takes a resource out of the catalogue, whatever put it there; false when it is not listed. A
 * later settled payment naming it lists it again.
 */
export async function removeResource(db: Db, url: string): Promise<boolean> {
  const rows = await queryRows<{ url: string }>(
    db,
    sql`delete from x402_resources where url = ${url} returning url`,
  );
  return rows.length > 0;
}

/** What discovery asks of the catalogue: the demo to add in front, the words to match, the page. */
export type CataloguePageParams = {
  /** The demo as the caller reaches it, listed first while x402 is on; its URL is listed once. */
  demo: CatalogueEntry & { since: Date };
  /** Every word must occur, case-insensitively, in the URL, the description or the MIME type. */
  words: readonly string[];
  limit: number;
  offset: number;
};

/** How many entries match, and the page of them: the demo first, then the rest oldest first. */
export async function cataloguePage(
  db: Db,
  params: CataloguePageParams,
): Promise<{ total: number; rows: CatalogueRow[] }> {
  const { demo } = params;
  const since = demo.since.toISOString();
  const matches = params.words.map((word) => {
    const pattern = `%${escapeLike(word)}%`;
    return sql`(e.url ilike ${pattern} or e.description ilike ${pattern} or coalesce(e.mime_type, '') ilike ${pattern})`;
  });
  const where: SQL = matches.length === 0 ? sql`true` : sql.join(matches, sql` and `);
  const [page] = await queryRows<{ total: number; rows: Row[] }>(
    db,
    sql`with entries as (
          select 0 as place, ${demo.url}::text as url, ${demo.description}::text as description,
            ${demo.mimeType}::text as mime_type, 'demo'::text as source,
            ${since}::timestamptz as created_at, ${since}::timestamptz as updated_at
          union all
          select 1, url, description, mime_type, source, created_at, updated_at
          from x402_resources where url <> ${demo.url}),
        matched as (select * from entries e where ${where})
        select (select count(*)::int from matched) as total,
          coalesce((select json_agg(json_build_object('url', p.url, 'description', p.description,
              'mime_type', p.mime_type, 'source', p.source,
              'created_at', js_iso_timestamp(p.created_at), 'updated_at', js_iso_timestamp(p.updated_at))
              order by p.place, p.created_at, p.url)
            from (select * from matched order by place, created_at, url
                  limit ${params.limit} offset ${params.offset}) p), '[]'::json) as rows`,
  );
  return { total: page?.total ?? 0, rows: (page?.rows ?? []).map(rowOf) };
}

/** A word as an ILIKE pattern matches it literally: `%`, `_` and the escape itself escaped. */
function escapeLike(word: string): string {
  return word.replace(/[\\%_]/g, (char) => `\\${char}`);
}
