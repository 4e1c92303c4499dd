import { sql } from "drizzle-orm";
import { check, index, pgTable, text, timestamp } from "drizzle-orm/pg-core";

/** What put a resource in the catalogue: the operator's `add`, or a settled payment naming it. */
export const CATALOGUE_SOURCES = ["operator", "settled"] as const;
export type CatalogueSource = (typeof CATALOGUE_SOURCES)[number];

/**
 * The facilitator's discovery catalogue (docs/x402.md#discovery-the-resource-catalogue): one row
 * per resource URL. The demo is not a row: discovery adds it while x402 is on, under the URL the
 * caller reaches it by. The length checks repeat the application's limits
 * (x402/payee/catalogue-entry.ts) as the last line.
 */
export const x402Resources = pgTable(
  "x402_resources",
  {
    url: text("url").primaryKey(),
    description: text("description").notNull().default(""),
    mimeType: text("mime_type"),
    source: text("source").notNull(),
    createdAt: timestamp("created_at", { withTimezone: true }).notNull().defaultNow(),
    updatedAt: timestamp("updated_at", { withTimezone: true }).notNull().defaultNow(),
  },
  (t) => [
    check("x402_resources_source_enum", sql`${t.source} IN ('operator','settled')`),
    check("x402_resources_url_length", sql`length(${t.url}) <= 2048`),
    check("x402_resources_description_length", sql`length(${t.description}) <= 500`),
    check("x402_resources_mime_type_length", sql`length(${t.mimeType}) <= 100`),
    // Discovery pages through the catalogue in this order.
    index("x402_resources_listing_idx").on(t.createdAt, t.url),
  ],
);
