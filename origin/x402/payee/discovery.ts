/**
 * The facilitator's discovery routes (docs/x402.md#discovery-the-resource-catalogue),
 * `GET discovery/resources` and `GET discovery/search`, in the shapes `withBazaar` of
 * `@x402/extensions` reads: the catalogue (catalogue.ts) with the demo in front, each entry an
 * `http` resource of x402 version 2 that accepts the node's one requirement. Public like the
 * facilitator's other routes; a malformed query is 400 `validation_failed` naming the parameter.
 */
import { type Context, Hono } from "hono";
import type { Db } from "../../db/client.ts";
import { AppError } from "../../errors.ts";
import type { AppEnv } from "../../http/env.ts";
import { route } from "../../openapi/route.ts";
import { type CatalogueRow, cataloguePage } from "./catalogue.ts";
import { DEMO_DESCRIPTION } from "./demo.ts";
import {
  type DiscoveryQuery,
  filtersPass,
  MAX_OFFSET,
  parseListQuery,
  parseSearchQuery,
} from "./discovery-query.ts";
import { type PaymentRequirements, X402_VERSION } from "./requirements.ts";
import type { ResourceUrlOf } from "./resource-url.ts";

/** `@x402/extensions`' DiscoveryResource, for what this facilitator lists. */
export type DiscoveryResource = {
  resource: string;
  type: "http";
  x402Version: number;
  accepts: PaymentRequirements[];
  lastUpdated: string;
  description?: string;
  mimeType?: string;
};

export type DiscoveryRouterDeps = {
  db: Db;
  /** The node's one requirement: every listed resource is paid by it, or this facilitator would not settle it. */
  requirements: PaymentRequirements;
  /** The URL the caller requested, as the demo names itself by it (resource-url.ts). */
  resourceUrlOf: ResourceUrlOf;
  /** When the demo's terms were read (start-up): its `lastUpdated`. */
  demoSince: Date;
};

type Page = { total: number; rows: CatalogueRow[] };

export function createDiscoveryRouter(deps: DiscoveryRouterDeps): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const page = async (c: Context<AppEnv>, query: DiscoveryQuery): Promise<Page> => {
    if (!filtersPass(query.filters, deps.requirements)) return { total: 0, rows: [] };
    return cataloguePage(deps.db, {
      demo: {
        url: demoUrlOf(deps.resourceUrlOf(c)),
        description: DEMO_DESCRIPTION,
        mimeType: "application/json",
        since: deps.demoSince,
      },
      words: query.words,
      limit: query.limit,
      offset: query.offset,
    });
  };
  const itemOf = (row: CatalogueRow): DiscoveryResource => ({
    resource: row.url,
    type: "http",
    x402Version: X402_VERSION,
    accepts: [deps.requirements],
    lastUpdated: row.updatedAt,
    ...(row.description ? { description: row.description } : {}),
    ...(row.mimeType ? { mimeType: row.mimeType } : {}),
  });

  route(app, "/x402/facilitator", "x402DiscoveryResources", async (c) => {
    const query = parsed(parseListQuery(c.req.query()));
    const { total, rows } = await page(c, query);
    return c.json({
      x402Version: X402_VERSION,
      items: rows.map(itemOf),
      pagination: { limit: query.limit, offset: query.offset, total },
    });
  });

  route(app, "/x402/facilitator", "x402DiscoverySearch", async (c) => {
    const query = parsed(parseSearchQuery(c.req.query()));
    const { total, rows } = await page(c, query);
    const next = query.offset + rows.length;
    const more = next < total;
    // Past MAX_OFFSET there is no cursor to give: the answer says it was cut instead.
    const cursor = more && next <= MAX_OFFSET ? String(next) : null;
    return c.json({
      x402Version: X402_VERSION,
      resources: rows.map(itemOf),
      partialResults: more && cursor === null,
      pagination: { limit: query.limit, cursor },
    });
  });
  return app;
}

function parsed(result: { ok: true; value: DiscoveryQuery } | { ok: false; error: string }): DiscoveryQuery {
  if (!result.ok) throw new AppError("validation_failed", result.error);
  return result.value;
}

/**
 * The demo's URL as the caller reaches it: the discovery request's own public URL
 * (resource-url.ts), with `/x402/demo` in place of the facilitator's path and no query.
 */
export function demoUrlOf(discoveryUrl: string): string {
  const url = new URL(discoveryUrl);
  const at = url.pathname.lastIndexOf("/x402/facilitator/");
  url.pathname = `${at < 0 ? "" : url.pathname.slice(0, at)}/x402/demo`;
  url.search = "";
  url.hash = "";
  return url.href;
}
