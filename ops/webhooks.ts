/**
 * `npm run webhooks -- <command>`: the operator's webhook endpoints (docs/operations.md#webhooks).
 * Uses the node's configuration (DATABASE_URL, or the embedded cluster of the running stack).
 *
 *   add --url URL --events TYPE,… [--json]   prints the endpoint and its secret, once
 *   list [--json]                            the endpoints with their pending deliveries and
 *                                            whether each is at its bound, never their secrets
 *   remove --id ID                           the endpoint and its deliveries
 *   replay --id ID [--from EVENT_ID | --event EVENT_ID]
 *                                            queues its events again (from that id, or that one
 *                                            event), re-enabling it
 *   rotate-secret --id ID [--overlap-hours H] prints a new secret, once; the old one signs beside
 *                                            it for H hours (24; 0 stops it at once)
 *   add-key                                  appends a new signing key to AGENT_WEBHOOKS_SIGNING_KEY_FILE
 *   retire-key --kid=KID                     removes a key from it (never the last)
 * add, remove, replay and rotate-secret take an optional --reason, recorded with the change (as the console's).
 *
 * Exit codes: docs/operations.md#exit-codes-of-the-operator-tools.
 */
import { existsSync } from "node:fs";
import { parseArgs } from "node:util";
import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../origin/db/client.ts";
import { openDatabase } from "../origin/db/open.ts";
import { checkWebhookUrl } from "../origin/webhooks/address-guard.ts";
import { listEndpoints } from "../origin/webhooks/endpoints.ts";
import {
  addWebhookEndpoint,
  removeWebhookEndpoint,
  replayWebhookEndpoint,
  rotateWebhookEndpointSecret,
  type UrlRefusal,
  type WebhookChange,
} from "../origin/webhooks/manage.ts";
import {
  addWebhookSigningKey,
  lockWebhookKeyFile,
  readWebhookKeyFile,
  retireWebhookSigningKey,
} from "../origin/webhooks/signing.ts";
import { type CliContext, type CliOutcome, DONE, refused, runCli, UsageError } from "./lib/cli-shell.ts";
import { nodeConfig } from "./lib/node-config.ts";
import { parseWebhooksCommand } from "./lib/webhooks-args.ts";

/**
 * The local stack's signing key (`npm start` makes it), used when the node names none, as the
 * other tools find `.data/` (docs/operations.md#operations).
 */
const LOCAL_WEBHOOK_KEY_FILE = ".data/webhook-signing.key";

const USAGE = `usage: npm run webhooks -- add --url URL --events TYPE,... [--json] [--reason TEXT]
       npm run webhooks -- list [--json]
       npm run webhooks -- remove --id ID [--reason TEXT]
       npm run webhooks -- replay --id ID [--from EVENT_ID | --event EVENT_ID] [--reason TEXT]
       npm run webhooks -- rotate-secret --id ID [--overlap-hours H] [--json] [--reason TEXT]
       npm run webhooks -- add-key
       npm run webhooks -- retire-key --kid=KID`;

async function run(argv: string[], { env }: CliContext): Promise<CliOutcome> {
  const [command, ...rest] = argv;
  const { values } = parseArgs({
    args: rest,
    options: {
      url: { type: "string" },
      events: { type: "string" },
      id: { type: "string" },
      from: { type: "string" },
      event: { type: "string" },
      reason: { type: "string" },
      kid: { type: "string" },
      "overlap-hours": { type: "string" },
      json: { type: "boolean" },
    },
    strict: true,
  });
  const parsed = parseWebhooksCommand(command, values);
  const config = nodeConfig(env);
  if (parsed.command === "add-key" || parsed.command === "retire-key") {
    const file =
      config.webhooks.signingKeyFile ??
      (existsSync(LOCAL_WEBHOOK_KEY_FILE) ? LOCAL_WEBHOOK_KEY_FILE : undefined);
    if (!file) {
      throw new UsageError(
        `AGENT_WEBHOOKS_SIGNING_KEY_FILE is not set, and there is no local stack's ${LOCAL_WEBHOOK_KEY_FILE}`,
      );
    }
    // Read and checked before anything is written: a file that cannot be read, is open to others
    // or holds no key is the environment's mistake (exit 2, nothing changed); only the write and
    // the rename that follow can leave a change cut off (exit 3).
    // docs/operations.md#exit-codes-of-the-operator-tools
    const checked = await readWebhookKeyFile(file);
    if (!checked.ok) throw new UsageError(checked.error.message);
    // One change of the file at a time, from its read to its rename: another add-key or
    // retire-key meanwhile would otherwise write the file as it read it, losing this one's change.
    const locked = await lockWebhookKeyFile(file);
    if (!locked.ok) return refused(locked.error.message);
    try {
      // Read again under the lock: a change that ended while this one waited is kept.
      const read = await readWebhookKeyFile(file);
      if (!read.ok) throw new UsageError(read.error.message);
      const keyFile = read.value;
      if (parsed.command === "add-key") {
        const added = await addWebhookSigningKey(keyFile);
        process.stdout.write(
          `webhooks: key ${added.jwk.kid} added; restart the origins: they serve it and sign with it too\n`,
        );
        return DONE;
      }
      const retired = await retireWebhookSigningKey(keyFile, parsed.kid);
      if (!retired.ok) {
        return refused(
          retired.error === "last_key" ? `${parsed.kid} is the only key` : `no key ${parsed.kid} in ${file}`,
        );
      }
      process.stdout.write(`webhooks: key ${parsed.kid} retired; restart the origins\n`);
      return DONE;
    } finally {
      await locked.value();
    }
  }
  if (parsed.command === "add") {
    // The URL's rules (scheme, credentials, its addresses) are the command line's too: a URL
    // delivery would refuse is answered before the database (or the embedded cluster) is opened.
    const checked = await checkWebhookUrl(parsed.url, { allowPrivate: config.webhooks.allowPrivate });
    if (!checked.ok) throw urlUsageError(checked);
  }
  const database = await openDatabase(config, 2);
  try {
    const { db } = database;
    switch (parsed.command) {
      case "add": {
        const added = await addWebhookEndpoint(db, {
          url: parsed.url,
          events: parsed.events,
          allowPrivate: config.webhooks.allowPrivate,
          change: change(parsed.reason),
        });
        // Checked above; its addresses may have changed since.
        if (!added.ok) throw urlUsageError(added.error);
        const endpoint = added.value;
        const shown = {
          id: endpoint.id,
          url: endpoint.url,
          events: endpoint.events,
          secret: endpoint.secret,
        };
        // The secret is shown here once, on stdout only; the database keeps it for signing.
        if (parsed.json) process.stdout.write(`${JSON.stringify(shown)}\n`);
        else {
          process.stdout.write(
            `endpoint ${shown.id}\nurl      ${shown.url}\nevents   ${shown.events.join(",")}\nsecret   ${shown.secret}\n` +
              "(the secret is shown once: keep it where the receiver verifies v1 signatures)\n",
          );
        }
        return DONE;
      }
      case "list": {
        const endpoints = await listEndpoints(db, { maxPending: config.webhooks.maxPending });
        // Fields are only ever added here: scripts read this JSON.
        const rows = endpoints.map((each) => ({
          id: each.id,
          url: each.url,
          events: each.events,
          enabled: each.enabled,
          disabled_reason: each.disabledReason,
          created_at: each.createdAt,
          pending: each.pending,
          at_bound: each.atBound,
        }));
        if (parsed.json) process.stdout.write(`${JSON.stringify(rows)}\n`);
        else if (rows.length === 0) {
          // Nothing printed would read as a tool that did nothing (docs/operations.md#webhooks).
          process.stdout.write(
            "webhooks: no endpoints (add one with: npm run webhooks -- add --url URL --events TYPE,...)\n",
          );
        } else {
          for (const row of rows) {
            const state = row.enabled ? "enabled" : `disabled (${row.disabled_reason ?? "no reason"})`;
            const queue = row.at_bound
              ? `${row.pending} pending (at the bound of ${config.webhooks.maxPending}: queueing paused)`
              : `${row.pending} pending`;
            process.stdout.write(`${row.id}  ${row.url}  ${row.events.join(",")}  ${state}  ${queue}\n`);
          }
        }
        return DONE;
      }
      case "remove": {
        if (!(await removeWebhookEndpoint(db, { id: parsed.id, change: change(parsed.reason) })))
          return refused(`no endpoint ${parsed.id}`);
        process.stdout.write(`webhooks: ${parsed.id} removed\n`);
        return DONE;
      }
      case "rotate-secret": {
        const rotated = await rotateWebhookEndpointSecret(db, {
          id: parsed.id,
          overlapSeconds: parsed.overlapSeconds,
          change: change(parsed.reason),
        });
        if (!rotated) return refused(`no endpoint ${parsed.id}`);
        const shown = { id: parsed.id, secret: rotated.secret, previous_secret_until: rotated.previousUntil };
        // The new secret is shown here once, as add shows the first; the old one is never shown.
        if (parsed.json) process.stdout.write(`${JSON.stringify(shown)}\n`);
        else {
          process.stdout.write(
            `endpoint ${shown.id}\nsecret   ${shown.secret}\n` +
              `(the secret is shown once; the old one signs beside it until ${shown.previous_secret_until})\n`,
          );
        }
        return DONE;
      }
      case "replay": {
        const queued = await replayWebhookEndpoint(db, {
          id: parsed.id,
          scope: parsed.scope,
          change: change(parsed.reason),
          firstAttemptSeconds: config.webhooks.retrySeconds[0] ?? 0,
        });
        if (queued === undefined) return refused(`no endpoint ${parsed.id}`);
        const why =
          queued === 0 && parsed.scope.kind === "event"
            ? await whyEventNotQueued(db, parsed.id, parsed.scope.eventId)
            : "";
        process.stdout.write(`webhooks: ${queued} deliveries queued for ${parsed.id}${why}\n`);
        return DONE;
      }
    }
  } finally {
    await database.close();
  }
}

/**
 * Why a replay of one event queued nothing, so that "0 queued" does not read as done: the log no
 * longer holds it (or never did), or the endpoint does not subscribe to its type.
 */
async function whyEventNotQueued(db: Db, endpointId: string, eventId: bigint): Promise<string> {
  const [row] = await queryRows<{ type: string | null; subscribed: boolean }>(
    db,
    sql`select e.type, e.type = any(w.event_types) as subscribed
        from webhook_endpoints w left join events e on e.id = ${eventId.toString()}::bigint
        where w.id = ${endpointId}::uuid`,
  );
  if (!row?.type)
    return ` (event ${eventId} is not in the log: it keeps events AGENT_EVENTS_RETENTION_DAYS days)`;
  return row.subscribed ? "" : ` (event ${eventId} is ${row.type}, which the endpoint does not subscribe to)`;
}

function urlUsageError(refusal: UrlRefusal): UsageError {
  return new UsageError(
    refusal.code === "private_address"
      ? `--url ${refusal.message}; set AGENT_WEBHOOKS_ALLOW_PRIVATE=true for local use`
      : `--url: ${refusal.message}`,
  );
}

function change(reason: string | undefined): WebhookChange {
  return { reason, source: "cli" };
}

runCli({ name: "webhooks", usage: USAGE, run });
