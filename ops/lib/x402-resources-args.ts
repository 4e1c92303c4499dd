/**
 * The arguments of `npm run x402-resources` (docs/operations.md#the-x402-discovery-catalogue),
 * checked before the database is opened: a resource the catalogue would refuse (its URL, its
 * description, its MIME type over a limit) is a usage error (exit 2) naming the limit.
 */
import {
  type CatalogueEntry,
  catalogueEntry,
  catalogueUrl,
} from "../../origin/x402/payee/catalogue-entry.ts";
import { refuseFlagsNotTaken, UsageError } from "./cli-shell.ts";

export type X402ResourcesCommand =
  | { command: "add"; entry: CatalogueEntry; json: boolean }
  | { command: "list"; json: boolean }
  | { command: "remove"; url: string };

/** The flags each command takes; another is a usage error. */
const TAKES = {
  add: ["url", "description", "mime-type", "json"],
  list: ["json"],
  remove: ["url"],
} as const satisfies Record<string, readonly string[]>;

export function parseX402ResourcesCommand(
  command: string | undefined,
  values: { url?: string; description?: string; "mime-type"?: string; json?: boolean },
): X402ResourcesCommand {
  const takes = command && Object.hasOwn(TAKES, command) ? TAKES[command as keyof typeof TAKES] : undefined;
  // `list --url URL` lists the whole catalogue, `remove --json` prints a line: refused.
  if (takes) refuseFlagsNotTaken(command!, values, takes);
  switch (command) {
    case "add": {
      if (!values.url) throw new UsageError("--url is required: the resource's public http(s) URL");
      const entry = catalogueEntry({
        url: values.url,
        description: values.description,
        mimeType: values["mime-type"],
      });
      if (!entry.ok) throw new UsageError(`--${flagOf(entry.error.field)}: ${entry.error.message}`);
      return { command, entry: entry.value, json: values.json === true };
    }
    case "list":
      return { command, json: values.json === true };
    case "remove": {
      if (!values.url) throw new UsageError("--url is required: the resource's URL, as list shows it");
      // The catalogue keys on the URL as the parser spells it, as add stored it.
      const url = catalogueUrl(values.url);
      if (!url.ok) throw new UsageError(`--url: ${url.error.message}`);
      return { command, url: url.value };
    }
    default:
      throw new UsageError(command ? `unknown command '${command}'` : "no command");
  }
}

function flagOf(field: "url" | "description" | "mime_type"): string {
  return field === "mime_type" ? "mime-type" : field;
}
