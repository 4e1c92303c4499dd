import { type Capability, capability } from "../capability.ts";
import type { Infrastructure } from "../infrastructure.ts";
import { startLoop } from "../workers/loop.ts";
import { sweepIdentities } from "./sweep.ts";

/** The identity sweep (docs/api.md): live identities checked against the enclave, periodically. */
export function createIdentityModule(infra: Infrastructure): Capability {
  const { config, logger, database, signer } = infra;
  return capability("identity", {
    workers: () => [
      startLoop("identity-sweep", config.identitySweep.periodSeconds * 1000, logger, async () => {
        const report = await sweepIdentities(
          { db: database.db, signer, logger, lockConnection: (work) => database.unbounded(work) },
          { envId: config.envId, windowSeconds: config.identitySweep.windowSeconds },
        );
        if (report.checked > 0) logger.info(report, "identity sweep");
      }),
    ],
  });
}
