/**
 * The query of a discovery request (docs/x402.md#discovery-the-resource-catalogue), as
 * `withBazaar(HTTPFacilitatorClient)` of `@x402/extensions` sends it: `listResources` pages with
 * `limit` and `offset`, `search` with `query`, `limit` and `cursor` (our cursor is the offset of the
 * next page, as digits); both may filter by `type`, `payTo`, `scheme`, `network` and `extensions`.
 * Parsed once here; a value that is no number, or a query too long or empty, is refused with a
 * message naming the parameter. A limit over MAX_LIMIT is served as MAX_LIMIT (the answer says
 * so): the client's own documentation calls the limit advisory.
 */
import { hasControlCharacter } from "../../../shared/control-characters.ts";
import { err, ok, type Result } from "../../../shared/result.ts";

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;
/** Deeper pages than this are refused: the catalogue is small, and each page is one query. */
export const MAX_OFFSET = 10_000;
export const MAX_QUERY_LENGTH = 200;
export const MAX_QUERY_WORDS = 8;

/** Filters on what an entry is and how it is paid; every entry is `http` and pays the node's one requirement. */
export type DiscoveryFilters = {
  type?: string;
  payTo?: string;
  scheme?: string;
  network?: string;
  extensions?: string;
};

export type DiscoveryQuery = {
  filters: DiscoveryFilters;
  /** Lowercase words of a search's query; none for a listing. */
  words: string[];
  limit: number;
  offset: number;
};

type Params = Record<string, string | undefined>;

const DIGITS = /^[0-9]{1,9}$/;

/** `GET …/discovery/resources`: `limit` (1…, default 20) and `offset` (0 to MAX_OFFSET). */
export function parseListQuery(params: Params): Result<DiscoveryQuery, string> {
  const limit = parseLimit(params.limit);
  if (!limit.ok) return limit;
  const offset = parseOffset("offset", params.offset);
  if (!offset.ok) return offset;
  return ok({ filters: filtersOf(params), words: [], limit: limit.value, offset: offset.value });
}

/** `GET …/discovery/search`: `query` (required), `limit`, and `cursor` (a page's `pagination.cursor`). */
export function parseSearchQuery(params: Params): Result<DiscoveryQuery, string> {
  const query = params.query?.trim() ?? "";
  if (query === "") return err("query is required: the words to search for");
  if (query.length > MAX_QUERY_LENGTH) return err(`query is over ${MAX_QUERY_LENGTH} characters`);
  const words = [...new Set(query.toLowerCase().split(/\s+/u))];
  if (words.length > MAX_QUERY_WORDS) return err(`query has over ${MAX_QUERY_WORDS} words`);
  if (words.some((word) => hasControlCharacter(word))) return err("query must not hold control characters");
  const limit = parseLimit(params.limit);
  if (!limit.ok) return limit;
  const offset = parseOffset("cursor", params.cursor);
  if (!offset.ok) return offset;
  return ok({ filters: filtersOf(params), words, limit: limit.value, offset: offset.value });
}

function parseLimit(text: string | undefined): Result<number, string> {
  if (text === undefined || text === "") return ok(DEFAULT_LIMIT);
  if (!DIGITS.test(text) || Number(text) < 1) return err("limit must be a whole number, 1 or more");
  return ok(Math.min(Number(text), MAX_LIMIT));
}

function parseOffset(name: "offset" | "cursor", text: string | undefined): Result<number, string> {
  if (text === undefined || text === "") return ok(0);
  if (!DIGITS.test(text) || Number(text) > MAX_OFFSET)
    return err(
      name === "cursor"
        ? "cursor must be the pagination.cursor of a previous answer"
        : `offset must be a whole number from 0 to ${MAX_OFFSET}`,
    );
  return ok(Number(text));
}

function filtersOf(params: Params): DiscoveryFilters {
  const filters: DiscoveryFilters = {};
  for (const name of ["type", "payTo", "scheme", "network", "extensions"] as const) {
    const value = params[name];
    if (value !== undefined && value !== "") filters[name] = value;
  }
  return filters;
}

/**
 * Whether the filters let an entry through: every entry is an `http` resource with no extensions,
 * paid by the node's one requirement, so the filters keep all entries or none.
 */
export function filtersPass(
  filters: DiscoveryFilters,
  requirement: { scheme: string; network: string; payTo: string },
): boolean {
  if (filters.extensions !== undefined) return false;
  if (filters.type !== undefined && filters.type !== "http") return false;
  if (filters.scheme !== undefined && filters.scheme !== requirement.scheme) return false;
  if (filters.network !== undefined && filters.network !== requirement.network) return false;
  if (filters.payTo !== undefined && filters.payTo.toLowerCase() !== requirement.payTo.toLowerCase())
    return false;
  return true;
}
