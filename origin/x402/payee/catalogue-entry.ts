/**
 * What the discovery catalogue accepts as a resource
 * (docs/x402.md#discovery-the-resource-catalogue): an absolute http(s) URL without credentials, at
 * most MAX_RESOURCE_URL_LENGTH characters as the URL parser spells it; a description of at most
 * MAX_DESCRIPTION_LENGTH characters, none of them a control character or a lone surrogate; a MIME
 * type `type/subtype`.
 * The operator's `add` refuses anything else, naming the limit; a settled payment whose resource
 * breaks a limit settles all the same and is not listed.
 */
import { hasControlCharacter } from "../../../shared/control-characters.ts";
import { err, ok, type Result } from "../../../shared/result.ts";

export const MAX_RESOURCE_URL_LENGTH = 2048;
export const MAX_DESCRIPTION_LENGTH = 500;
export const MAX_MIME_TYPE_LENGTH = 100;
/** Resources the operator may register; settled ones are not counted (each cost its payer the price). */
export const MAX_REGISTERED_RESOURCES = 1000;

/** A resource as the catalogue stores it. */
export type CatalogueEntry = { url: string; description: string; mimeType: string | null };

export type EntryRefusal = { field: "url" | "description" | "mime_type"; message: string };

/** A UTF-16 surrogate not paired with its other half (a pair reads as one code point under `u`). */
const LONE_SURROGATE = /\p{Surrogate}/u;

const MIME_TYPE = /^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*\/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*$/;

/** The URL as the parser spells it (what the catalogue keys on), or why it is refused. */
export function catalogueUrl(text: string): Result<string, EntryRefusal> {
  const refuse = (message: string) => err({ field: "url" as const, message });
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return refuse("the resource must be an absolute http(s) URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    return refuse("the resource must be an absolute http(s) URL");
  // The catalogue is public: a URL with credentials would publish them.
  if (url.username !== "" || url.password !== "")
    return refuse("the resource URL must not carry credentials");
  if (url.href.length > MAX_RESOURCE_URL_LENGTH)
    return refuse(`the resource URL is over ${MAX_RESOURCE_URL_LENGTH} characters`);
  return ok(url.href);
}

/** A resource the operator registers, or why it is refused (the first limit it breaks). */
export function catalogueEntry(params: {
  url: string;
  description?: string;
  mimeType?: string;
}): Result<CatalogueEntry, EntryRefusal> {
  const url = catalogueUrl(params.url);
  if (!url.ok) return url;
  const description = params.description?.trim() ?? "";
  if (description.length > MAX_DESCRIPTION_LENGTH)
    return err({
      field: "description",
      message: `the description is over ${MAX_DESCRIPTION_LENGTH} characters`,
    });
  // The catalogue is read by people and programs alike; and Postgres cannot store a NUL at all.
  if (hasControlCharacter(description))
    return err({ field: "description", message: "the description must not hold control characters" });
  // A lone surrogate is no character at all, and Postgres's JSON refuses its escape: in a settle
  // batch's claim rows it failed the claim of every payment of the batch.
  if (LONE_SURROGATE.test(description))
    return err({ field: "description", message: "the description must be well-formed Unicode" });
  const mimeType = params.mimeType?.trim() || null;
  if (mimeType !== null && (mimeType.length > MAX_MIME_TYPE_LENGTH || !MIME_TYPE.test(mimeType)))
    return err({
      field: "mime_type",
      message: `the MIME type must be type/subtype, at most ${MAX_MIME_TYPE_LENGTH} characters`,
    });
  return ok({ url: url.value, description, mimeType });
}

/**
 * The resource a payment's envelope names (`resource: {url, description?, mimeType?}`, as the
 * quote gave it), as the catalogue would list it once the payment settles; undefined when it
 * breaks a limit, so the payment settles and is not listed.
 */
export function settledResourceOf(resource: unknown): CatalogueEntry | undefined {
  if (typeof resource !== "object" || resource === null) return undefined;
  const { url, description, mimeType } = resource as Record<string, unknown>;
  if (typeof url !== "string") return undefined;
  // Null is absent, as x402's own schemas read a resource.
  if (description != null && typeof description !== "string") return undefined;
  if (mimeType != null && typeof mimeType !== "string") return undefined;
  const entry = catalogueEntry({
    url,
    description: description ?? undefined,
    mimeType: mimeType ?? undefined,
  });
  return entry.ok ? entry.value : undefined;
}
