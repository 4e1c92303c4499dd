import { startEnclaveProcess } from "../../testing/enclave-process.ts";
import { describeSignerConformance } from "./conformance.ts";
import { createSignerClient } from "./create-signer-client.ts";

// AGENT_SIGNER_LIVE_IDENTITY_ENABLED unset, the default: identity proofs are the dormant stub's,
// every other op the live enclave's.
describeSignerConformance("socket client with dormant identity ops (createSignerClient)", {
  startEnclave: () => startEnclaveProcess(),
  client: (enclave, options) =>
    createSignerClient({
      endpoint: `unix://${enclave.socketPath}`,
      liveIdentityEnabled: false,
      requestTimeoutMs: options.requestTimeoutMs,
    }),
  dormantOps: ["publicIdentity", "proveIdentity"],
});
