import { errorMessage } from "../../shared/error-message.ts";
import type { Infrastructure } from "../infrastructure.ts";

/**
 * An enclave behind on the stored policies (recovered, and not resealed yet) is logged as a
 * warning with the instruction, and the origin starts: it applies the stored policies itself, and
 * refusing to start over the enclave's second line of defence would take the service down for an
 * operator's step that can run beside it. /healthz keeps reporting it as `degraded`.
 */
export async function warnPoliciesNotHeld(
  infra: Pick<Infrastructure, "policiesHeld" | "logger">,
): Promise<void> {
  if (!infra.policiesHeld) return;
  const held = await infra.policiesHeld().catch((error: unknown) => {
    infra.logger.warn({ error: errorMessage(error) }, "could not read the stored policies at start");
    return undefined;
  });
  if (held === undefined) return;
  if (held.instruction !== undefined) {
    infra.logger.warn(
      { checked: held.checked, behind: held.behind, freeze_missing: held.freeze_missing },
      held.instruction,
    );
  } else if (!held.ok) {
    infra.logger.warn({ code: held.error }, "could not ask the enclave for the stored policies at start");
  }
}
