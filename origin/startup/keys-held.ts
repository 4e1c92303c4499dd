import { err, ok } from "../../shared/result.ts";
import type { StartupCheck } from "../capability.ts";
import type { Infrastructure } from "../infrastructure.ts";

/**
 * An enclave that answers but lacks the assigned keys is not the one these wallets were made in:
 * serving would answer every signing request "no such key" and the sweep would disable every
 * identity, so the origin refuses to start. One that does not answer is let through (/healthz
 * reports it), as for the policy. Without an enclave endpoint there is nothing to ask.
 */
export async function checkKeysHeld(
  infra: Pick<Infrastructure, "keysHeld" | "logger">,
): Promise<StartupCheck<void>> {
  if (!infra.keysHeld) return ok(undefined);
  const held = await infra.keysHeld();
  if (held.missing > 0)
    return err([`${held.instruction} (${held.missing} of ${held.checked} keys checked are missing)`]);
  if (!held.ok)
    infra.logger.warn({ code: held.error }, "could not ask the enclave for the assigned keys at start");
  return ok(undefined);
}
