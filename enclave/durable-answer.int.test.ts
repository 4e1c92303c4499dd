import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import type { EnclaveResponse } from "../shared/enclave-protocol.ts";
import { StateJournal } from "./state-journal.ts";
import { StateSlots } from "./state-slots.ts";
import {
  type AgentKey,
  agentKeys,
  NODE_PAY_TO,
  NODE_X402_UNITS,
  nodePolicy,
  x402,
} from "./testing/agent-policy.ts";
import { privileged } from "./testing/capabilities.ts";
import { type ClockedEnclave, startClockedEnclave } from "./testing/clocked-enclave.ts";
import { RawEnclaveClient } from "./testing/raw-client.ts";

// The enclave signs while the write of the count is in flight (docs/performance.md, "The enclave"),
// and must still answer only once that write is durable. The disk cannot be made slow or failing
// here, so the state write (a journal record, or a full copy) is held, or failed, by a spy around
// the real one.

/** Holds every state write until `release`; the writes then run for real. */
function holdStateWrites(): { release: () => void; started: () => number } {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  let started = 0;
  const append = StateJournal.prototype.append;
  vi.spyOn(StateJournal.prototype, "append").mockImplementation(async function (
    this: StateJournal,
    plaintext,
    sequence,
  ) {
    started++;
    await gate;
    return append.call(this, plaintext, sequence);
  });
  const write = StateSlots.prototype.write;
  vi.spyOn(StateSlots.prototype, "write").mockImplementation(async function (
    this: StateSlots,
    plaintext,
    sequence,
  ) {
    started++;
    await gate;
    return write.call(this, plaintext, sequence);
  });
  return { release: open, started: () => started };
}

/** The answer of `pending` if it has come within `ms`, else "none yet". */
async function answerWithin(
  pending: Promise<EnclaveResponse>,
  ms: number,
): Promise<EnclaveResponse | "none yet"> {
  return Promise.race([
    pending,
    new Promise<"none yet">((resolve) => setTimeout(() => resolve("none yet"), ms)),
  ]);
}

describe("a signature leaves only after the write that includes its count is durable (the enclave's server)", () => {
  let enclave: ClockedEnclave;
  let client: RawEnclaveClient;
  let key: AgentKey;

  beforeAll(async () => {
    enclave = await startClockedEnclave({ envId: "durable-answer", at: new Date() });
    ({ client } = await RawEnclaveClient.connect(enclave.fixture.socketPath));
    await privileged(client, enclave.fixture, "configure_policy", nodePolicy());
    [key] = (await agentKeys(client, enclave.fixture, 1)) as [AgentKey];
  });
  afterEach(() => {
    vi.restoreAllMocks();
  });
  afterAll(async () => {
    client?.close();
    await enclave?.close();
  });

  it("answers sign_x402_authorization only once its count's write has completed", async () => {
    const held = holdStateWrites();
    const pending = client.request("sign_x402_authorization", x402(key, NODE_PAY_TO, NODE_X402_UNITS));
    expect(await answerWithin(pending, 300)).toBe("none yet");
    expect(held.started()).toBe(1);
    held.release();
    expect(await pending).toMatchObject({
      ok: true,
      result: { signature: expect.stringMatching(/^0x[0-9a-f]{130}$/) },
    });
  });

  it("answers seal_failed, and no signature, when that write fails", async () => {
    vi.spyOn(StateJournal.prototype, "append").mockRejectedValueOnce(new Error("EIO"));
    vi.spyOn(StateSlots.prototype, "write").mockRejectedValueOnce(new Error("EIO"));
    const answer = await client.request("sign_x402_authorization", x402(key, NODE_PAY_TO, NODE_X402_UNITS));
    expect(answer).toMatchObject({ ok: false, error: { code: "seal_failed" } });
    expect(JSON.stringify(answer)).not.toContain("signature");
  });
});
