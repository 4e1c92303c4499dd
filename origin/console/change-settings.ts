import type { Handler } from "hono";
import { type SettingsChangeResponse, settingsChangeRequestSchema } from "../../shared/console-schemas.ts";
import { AppError } from "../errors.ts";
import type { AppEnv } from "../http/env.ts";
import { parseJsonBody } from "../http/json-body.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { changeRegistrationSettings, type SettingsRefusal } from "../registration/settings.ts";

/**
 * POST {base}/admin/agents/registration/settings
 * (docs/operations.md#the-operator-console-and-metrics): changes registration settings through the
 * service the registration CLI uses. Unknown settings, invalid ranges and empty reasons are 400 and
 * change nothing; every change is recorded with before, after and reason, under the policy row's
 * lock, so concurrent changes serialize.
 */
export function changeSettingsHandler(deps: Infrastructure): Handler<AppEnv> {
  return async (c) => {
    const body = await parseJsonBody(c, settingsChangeRequestSchema);
    const result = await changeRegistrationSettings(deps.database.db, {
      changes: body.changes,
      reason: body.reason,
      source: "console",
      operator: c.get("operator"),
    });
    if (!result.ok) throw refusal(result.error);
    c.set("logFields", { outcome: "settings_changed", changed: result.value.changed.length > 0 });
    const response: SettingsChangeResponse = {
      changed: result.value.changed,
      settings: result.value.after as SettingsChangeResponse["settings"],
    };
    return c.json(response);
  };
}

function refusal(error: SettingsRefusal): AppError {
  switch (error.code) {
    case "unknown_setting":
      return new AppError("validation_failed", `unknown setting: ${error.setting}`, {
        fields: { setting: error.setting },
      });
    case "invalid_value":
      return new AppError("validation_failed", `${error.setting} ${error.message}`, {
        fields: { setting: error.setting },
      });
    case "empty_reason":
      return new AppError("validation_failed", "reason must not be empty");
    case "no_change_requested":
      return new AppError("validation_failed", "changes must name at least one setting");
  }
}
