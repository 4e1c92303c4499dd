import { type Capability, capability } from "../capability.ts";
import type { Infrastructure } from "../infrastructure.ts";
import type { ServiceWallets } from "./charts.ts";
import type { NodeLocal } from "./node-local.ts";
import { createConsoleRouter } from "./router.ts";

/**
 * The operator console and /metrics: private origin only (the edge never routes them), mounted
 * whatever the gateway switch (router.ts says why).
 */
export function createConsoleModule(
  infra: Infrastructure,
  node: NodeLocal,
  wallets?: ServiceWallets,
): Capability {
  return capability("console", {
    routes: [{ path: "/", router: createConsoleRouter(infra, node, wallets) }],
  });
}
