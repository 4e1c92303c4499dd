/**
 * The arguments of `npm run webhooks` (docs/operations.md#webhooks), checked before the database
 * is opened: a bad one is a usage error (exit 2), whatever the database holds.
 */
import { parseEventTypes, WEBHOOK_EVENT_TYPES } from "../../origin/webhooks/event-types.ts";
import { UsageError } from "./cli-shell.ts";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export type WebhooksCommand =
  | { command: "add"; url: string; events: string[]; json: boolean }
  | { command: "list"; json: boolean }
  | { command: "remove"; id: string }
  | { command: "replay"; id: string; fromEventId: bigint | undefined };

export function parseWebhooksCommand(
  command: string | undefined,
  values: { url?: string; events?: string; id?: string; from?: string; json?: boolean },
): WebhooksCommand {
  const id = (): string => {
    if (!values.id || !UUID.test(values.id)) throw new UsageError("--id must be an endpoint id (a UUID)");
    return values.id;
  };
  switch (command) {
    case "add": {
      // The URL's own rules (scheme, addresses) are checkWebhookUrl's, the same as at delivery.
      if (!values.url) throw new UsageError("--url is required");
      if (!values.events)
        throw new UsageError(`--events is required: a comma list of ${WEBHOOK_EVENT_TYPES.join(",")}`);
      const parsed = parseEventTypes(values.events);
      if (!parsed.ok) {
        throw new UsageError(
          `unknown event type ${parsed.unknown.join(", ")}: --events takes a list of ${WEBHOOK_EVENT_TYPES.join(",")}`,
        );
      }
      return { command, url: values.url, events: parsed.types, json: values.json === true };
    }
    case "list":
      return { command, json: values.json === true };
    case "remove":
      return { command, id: id() };
    case "replay": {
      if (values.from !== undefined && !/^\d{1,19}$/.test(values.from)) {
        throw new UsageError("--from must be an event id (a whole number)");
      }
      return { command, id: id(), fromEventId: values.from === undefined ? undefined : BigInt(values.from) };
    }
    default:
      throw new UsageError(command ? `unknown command '${command}'` : "no command");
  }
}
