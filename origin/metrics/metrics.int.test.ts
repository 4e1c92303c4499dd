import { startEnclaveProcess } from "../../testing/enclave-process.ts";
import { describeSignerConformance } from "../signer/conformance.ts";
import { createSignerClient } from "../signer/create-signer-client.ts";
import { createDormantSignerClient } from "../signer/dormant-stub.ts";
import { createOriginMetrics } from "./metrics.ts";

// The wrapper the origin puts around whatever signer it built (open-infrastructure.ts): the live
// socket client, or the dormant signer when no endpoint is configured.
describeSignerConformance("metrics wrapper around the socket client", {
  startEnclave: () => startEnclaveProcess(),
  client: (enclave, options) =>
    createOriginMetrics().observeSigner(
      createSignerClient({
        endpoint: `unix://${enclave.socketPath}`,
        liveIdentityEnabled: true,
        requestTimeoutMs: options.requestTimeoutMs,
      }),
    ),
  dormantOps: [],
});

describeSignerConformance("metrics wrapper around the dormant signer", {
  client: () => createOriginMetrics().observeSigner(createDormantSignerClient()),
});
