import { describeSignerConformance } from "./conformance.ts";
import { createDormantSignerClient } from "./dormant-stub.ts";

describeSignerConformance("the dormant signer (no enclave endpoint)", {
  client: () => createDormantSignerClient(),
});
