/**
 * The arguments of `npm run webhooks` (docs/operations.md#webhooks), checked before the database
 * is opened: a bad one is a usage error (exit 2), whatever the database holds.
 */
import type { ReplayScope } from "../../origin/webhooks/endpoints.ts";
import { parseEventTypes, WEBHOOK_EVENT_TYPES } from "../../origin/webhooks/event-types.ts";
import { DEFAULT_SECRET_OVERLAP_HOURS, MAX_SECRET_OVERLAP_HOURS } from "../../shared/console-schemas.ts";
import { MAX_EVENT_ID, MAX_WEBHOOK_URL_LENGTH, parseEventId } from "../../shared/event-types.ts";
import { isUuid } from "../../shared/uuid.ts";
import { refuseFlagsNotTaken, UsageError } from "./cli-shell.ts";

export type WebhooksCommand =
  | { command: "add"; url: string; events: string[]; json: boolean; reason: string | undefined }
  | { command: "list"; json: boolean }
  | { command: "remove"; id: string; reason: string | undefined }
  | { command: "replay"; id: string; scope: ReplayScope; reason: string | undefined }
  | {
      command: "rotate-secret";
      id: string;
      overlapSeconds: number;
      json: boolean;
      reason: string | undefined;
    }
  | { command: "add-key" }
  | { command: "retire-key"; kid: string };

/** The flags each command takes; another is a usage error. */
const TAKES = {
  add: ["url", "events", "json", "reason"],
  list: ["json"],
  remove: ["id", "reason"],
  replay: ["id", "from", "event", "reason"],
  "rotate-secret": ["id", "overlap-hours", "json", "reason"],
  "add-key": [],
  "retire-key": ["kid"],
} as const satisfies Record<string, readonly string[]>;

export function parseWebhooksCommand(
  command: string | undefined,
  values: {
    url?: string;
    events?: string;
    id?: string;
    from?: string;
    event?: string;
    reason?: string;
    kid?: string;
    json?: boolean;
    "overlap-hours"?: string;
  },
): WebhooksCommand {
  const takes = command && Object.hasOwn(TAKES, command) ? TAKES[command as keyof typeof TAKES] : undefined;
  // `retire-key --reason TEXT` records no reason, `list --id ID` lists every endpoint: refused.
  if (takes) refuseFlagsNotTaken(command!, values, takes);
  const reason = values.reason?.trim() ? values.reason : undefined;
  const id = (): string => {
    if (!values.id || !isUuid(values.id)) throw new UsageError("--id must be an endpoint id (a UUID)");
    return values.id;
  };
  switch (command) {
    case "add": {
      // The URL's own rules (scheme, addresses) are checkWebhookUrl's, the same as at delivery.
      if (!values.url) throw new UsageError("--url is required");
      if (values.url.length > MAX_WEBHOOK_URL_LENGTH)
        throw new UsageError(`--url must be at most ${MAX_WEBHOOK_URL_LENGTH} characters, as in the console`);
      if (!values.events)
        throw new UsageError(`--events is required: a comma list of ${WEBHOOK_EVENT_TYPES.join(",")}`);
      const parsed = parseEventTypes(values.events);
      if (!parsed.ok) {
        throw new UsageError(
          `unknown event type ${parsed.unknown.join(", ")}: --events takes a list of ${WEBHOOK_EVENT_TYPES.join(",")}`,
        );
      }
      return { command, url: values.url, events: parsed.types, json: values.json === true, reason };
    }
    case "list":
      return { command, json: values.json === true };
    case "remove":
      return { command, id: id(), reason };
    case "replay": {
      if (values.from !== undefined && values.event !== undefined) {
        throw new UsageError("--from and --event do not go together");
      }
      const eventId = (flag: string, value: string): bigint => {
        const parsed = parseEventId(value);
        if (parsed === undefined)
          throw new UsageError(`${flag} must be an event id (a whole number up to ${MAX_EVENT_ID})`);
        return parsed;
      };
      const scope: ReplayScope =
        values.event !== undefined
          ? { kind: "event", eventId: eventId("--event", values.event) }
          : values.from !== undefined
            ? { kind: "from", eventId: eventId("--from", values.from) }
            : { kind: "all" };
      return { command, id: id(), scope, reason };
    }
    case "rotate-secret": {
      const hours = values["overlap-hours"] ?? String(DEFAULT_SECRET_OVERLAP_HOURS);
      if (!/^\d{1,3}$/.test(hours) || Number(hours) > MAX_SECRET_OVERLAP_HOURS) {
        throw new UsageError(
          `--overlap-hours must be a whole number of hours from 0 to ${MAX_SECRET_OVERLAP_HOURS}`,
        );
      }
      return { command, id: id(), overlapSeconds: Number(hours) * 3600, json: values.json === true, reason };
    }
    case "add-key":
      return { command };
    case "retire-key":
      if (!values.kid || !/^[A-Za-z0-9_-]{1,64}$/.test(values.kid)) {
        throw new UsageError("--kid must be a key id, as the key set lists it");
      }
      return { command, kid: values.kid };
    default:
      throw new UsageError(command ? `unknown command '${command}'` : "no command");
  }
}
