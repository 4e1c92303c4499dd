import { describe, expect, it } from "vitest";
import { ENCLAVE_ERROR_CODES } from "../../shared/enclave-protocol.ts";
import { createSignerClient } from "./create-signer-client.ts";
import { createDormantSignerClient } from "./dormant-stub.ts";
import { socketPathOfEndpoint } from "./endpoint.ts";
import { CLIENT_FAILURE, classifyFailureCode } from "./failure-class.ts";

describe("failure classes (docs/operations.md#what-a-finding-means)", () => {
  it("classes every enclave code", () => {
    const table = Object.fromEntries(ENCLAVE_ERROR_CODES.map((code) => [code, classifyFailureCode(code)]));
    expect(table).toEqual({
      malformed: "terminal_wire",
      wrong_profile: "terminal_wire",
      key_purpose_mismatch: "terminal_agent",
      capability_rejected: "terminal_config",
      cap_exceeded: "terminal_agent",
      not_configured: "terminal_config",
      seal_failed: "terminal_config",
    });
  });

  it("classes the client's own codes", () => {
    const table = Object.fromEntries(
      Object.values(CLIENT_FAILURE).map((code) => [code, classifyFailureCode(code)]),
    );
    expect(table).toEqual({
      signer_unreachable: "retryable",
      signer_timeout: "retryable",
      signer_connection_lost: "retryable",
      signer_client_closed: "retryable",
      protocol_mismatch: "terminal_wire",
      malformed_reply: "terminal_malformed",
      capability_unavailable: "terminal_config",
      request_too_large: "terminal_unknown",
      agent_signer_protocol_unavailable: "terminal_unknown",
    });
  });

  it("classes anything else as terminal_unknown", () => {
    expect(classifyFailureCode("something_new")).toBe("terminal_unknown");
  });
});

describe("createSignerClient", () => {
  it("is fully dormant without an endpoint", async () => {
    const client = createSignerClient({ endpoint: undefined, liveIdentityEnabled: true });
    expect(await client.signX402Authorization({} as never)).toMatchObject({
      ok: false,
      error: { class: "terminal_unknown", code: "agent_signer_protocol_unavailable" },
    });
  });

  it("answers identity proofs from the stub without touching the socket when live identity is off", async () => {
    const client = createSignerClient({
      endpoint: "unix:///nonexistent/enclave.sock",
      liveIdentityEnabled: false,
    });
    expect(
      await client.proveIdentity({ keyRef: "ab".repeat(32), verifierNonce: `0x${"00".repeat(32)}` }),
    ).toMatchObject({
      error: { class: "terminal_unknown", code: "agent_signer_protocol_unavailable" },
    });
    // Other ops are live: the missing socket is a transport failure before the enclave.
    expect(await client.publicIdentity({ keyRef: "ab".repeat(32) })).toMatchObject({
      error: { code: "agent_signer_protocol_unavailable" },
    });
    expect(
      await client.capabilityCounter({
        authority: `0x${"00".repeat(32)}`,
        scope: "admin",
        op: "generate_keys",
      }),
    ).toMatchObject({
      ok: false,
      error: { class: "retryable", code: "signer_unreachable" },
    });
    await client.close();
  });

  it("refuses an endpoint that is not unix://", () => {
    expect(() => createSignerClient({ endpoint: "http://localhost:1", liveIdentityEnabled: true })).toThrow(
      /unix:\/\//,
    );
  });

  it("gives every op of the dormant client the same answer", async () => {
    const client = createDormantSignerClient();
    const answer = await client.generateKeys({ namespace: "faucet", count: 1, batchId: "b" }, async () => {
      throw new Error("never asked");
    });
    expect(answer).toMatchObject({ error: { code: "agent_signer_protocol_unavailable" } });
  });
});

describe("socketPathOfEndpoint", () => {
  it("accepts absolute and cwd-relative unix:// paths", () => {
    expect(socketPathOfEndpoint("unix:///var/run/enclave.sock")).toBe("/var/run/enclave.sock");
    expect(socketPathOfEndpoint("unix://.data/enclave.sock")).toBe(`${process.cwd()}/.data/enclave.sock`);
    expect(() => socketPathOfEndpoint("unix://")).toThrow();
    expect(() => socketPathOfEndpoint("/var/run/enclave.sock")).toThrow();
  });
});
