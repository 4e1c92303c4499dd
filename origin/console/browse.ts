import type { Context, Handler } from "hono";
import * as z from "zod";
import { ACTION_STATUSES } from "../../shared/action-status.ts";
import { pageQuerySchema, searchQuerySchema } from "../../shared/console-browse-schemas.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { readAgentDetail } from "./agent-detail.ts";
import {
  readAction,
  readActionPage,
  readIdentityPage,
  readSettlement,
  readSettlementPage,
  search,
} from "./browse-queries.ts";

/**
 * The console's browsing routes (docs/api.md#the-operator-console), read only: search, paged
 * lists, one agent, one action, one settlement. A malformed query or id is a 400 naming the field;
 * an unknown id a 404 `not_found`.
 */

const DEFAULT_LIMIT = 50;
const idSchema = z.uuid();

/** The query parsed with `schema`, or a 400 whose message names what to fix. */
function query<T>(c: Context<AppEnv>, schema: z.ZodType<T>): T {
  const parsed = schema.safeParse(c.req.query());
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const message =
      issue.code === "unrecognized_keys" ? `unknown query parameter ${issue.keys.join(", ")}` : issue.message;
    throw new AppError("validation_failed", message);
  }
  return parsed.data;
}

function idParam(c: Context<AppEnv>, name: string, what: string): string {
  const value = c.req.param(name) ?? "";
  if (!idSchema.safeParse(value).success)
    throw new AppError("validation_failed", `${name} must be ${what} (a UUID)`);
  return value.toLowerCase();
}

const listQuery = pageQuerySchema.strict();
const actionListQuery = pageQuerySchema
  .extend({
    agent_id: z.uuid({ error: "agent_id must be an agent id (a UUID)" }).optional(),
    status: z
      .enum(ACTION_STATUSES, { error: `status must be one of ${ACTION_STATUSES.join(", ")}` })
      .optional(),
  })
  .strict();

type BrowseHandlers = Record<
  "search" | "identities" | "agent" | "actions" | "action" | "settlements" | "settlement",
  Handler<AppEnv>
>;

export function browseConsoleHandlers(deps: Infrastructure): BrowseHandlers {
  const db = () => deps.database.db;
  return {
    search: async (c) => c.json(await search(db(), query(c, searchQuerySchema).q)),
    identities: async (c) => {
      const { limit, cursor } = query(c, listQuery);
      return c.json(await readIdentityPage(db(), { limit: limit ?? DEFAULT_LIMIT, cursor }));
    },
    agent: async (c) => {
      const agentId = idParam(c, "agent_id", "an agent id");
      const detail = await readAgentDetail(db(), deps.rpc, agentId, deps.clock.now());
      if (!detail) throw new AppError("not_found", "no such agent");
      return c.json(detail);
    },
    actions: async (c) => {
      const { limit, cursor, agent_id, status } = query(c, actionListQuery);
      return c.json(
        await readActionPage(db(), {
          limit: limit ?? DEFAULT_LIMIT,
          cursor,
          agentId: agent_id?.toLowerCase(),
          status,
        }),
      );
    },
    action: async (c) => {
      const action = await readAction(db(), idParam(c, "action_id", "an action id"));
      if (!action) throw new AppError("not_found", "no such action");
      return c.json(action);
    },
    settlements: async (c) => {
      const { limit, cursor } = query(c, listQuery);
      return c.json(await readSettlementPage(db(), { limit: limit ?? DEFAULT_LIMIT, cursor }));
    },
    settlement: async (c) => {
      const settlement = await readSettlement(db(), idParam(c, "settlement_id", "a settlement id"));
      if (!settlement) throw new AppError("not_found", "no such settlement");
      return c.json(settlement);
    },
  };
}
