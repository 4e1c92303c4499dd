import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startDevnet } from "../../devnet/index.ts";
import { type CountingPassThrough, startCountingPassThrough } from "../../testing/counting-pass-through.ts";
import { createTestDatabase, type TestDatabase } from "../../testing/database.ts";
import { checkingFetch } from "../../testing/openapi-check.ts";
import { startTestOrigin, type TestOrigin } from "../../testing/origin.ts";
import { provisionedIdentity, seedFreeKeys } from "../../testing/seed.ts";

/**
 * POST /rpc against JSON-RPC 2.0's rules on notifications and ids (docs/api.md#json-rpc-on-agentv1rpc),
 * with raw fetch: the bodies are compared as the text the origin wrote, so an id changed on its way
 * through JSON.parse shows. Every answer is also checked against the OpenAPI document. A counting
 * pass-through in front of the devnet shows what reached the chain.
 */
describe("/rpc: JSON-RPC 2.0 notifications and ids (real devnet and database)", () => {
  let testDb: TestDatabase;
  let devnet: Awaited<ReturnType<typeof startDevnet>>;
  let counter: CountingPassThrough;
  let origin: TestOrigin;
  let token = "";
  const fetchChecked = checkingFetch();

  beforeAll(async () => {
    testDb = await createTestDatabase();
    await seedFreeKeys(testDb.handle.db, 1);
    devnet = await startDevnet({ port: 0 });
    counter = await startCountingPassThrough(devnet.url);
    origin = await startTestOrigin({ database: testDb.handle, rpcUrl: counter.url });
    const issued = await provisionedIdentity(testDb.handle.db, {
      capabilities: ["read"],
      origin: "operator",
    });
    token = issued.token;
  });
  afterAll(async () => {
    await origin?.close();
    await counter?.close();
    await devnet?.close();
    await testDb?.drop();
  });

  const rpc = async (body: string): Promise<{ status: number; text: string }> => {
    const response = await fetchChecked(`${origin.base}/agent/v1/rpc`, {
      method: "POST",
      body,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    });
    return { status: response.status, text: await response.text() };
  };
  const CHAIN_ID = '{"jsonrpc":"2.0","method":"eth_chainId"}';
  const withId = (id: string, method = "eth_chainId"): string =>
    `{"jsonrpc":"2.0","id":${id},"method":"${method}"}`;

  it("answers a notification with nothing (204, no body) and forwards none, whatever its method or params", async () => {
    // Mutation: a request without an id planned as one with id null is answered {"id":null,…}.
    const before = counter.calls;
    for (const body of [
      CHAIN_ID,
      '{"jsonrpc":"2.0","method":"eth_sendRawTransaction","params":["0x00"]}',
      '{"jsonrpc":"2.0","method":"eth_blockNumber","params":"latest"}',
    ]) {
      // Twice: the second comes from a token seen from this client lately, through the prefetch.
      for (const _ of [1, 2]) expect(await rpc(body), body).toEqual({ status: 204, text: "" });
    }
    expect(counter.calls).toBe(before);
  });

  it("answers the requests of a batch and not its notifications; a batch of notifications only with nothing", async () => {
    // Mutation: notifications' places kept in the answered array give [null, {id: 7, …}].
    const mixed = await rpc(`[${CHAIN_ID},${withId("7")},${CHAIN_ID}]`);
    expect(mixed.status).toBe(200);
    expect(mixed.text).toBe('[{"jsonrpc":"2.0","id":7,"result":"0x4d"}]');
    const before = counter.calls;
    expect(await rpc(`[${CHAIN_ID},${CHAIN_ID}]`)).toEqual({ status: 204, text: "" });
    expect(counter.calls).toBe(before);
    // An invalid element is not a notification, with or without an id: it is answered on its own.
    const invalid = await rpc(`[${CHAIN_ID},{"jsonrpc":"1.0","method":"eth_chainId"},1]`);
    expect(invalid.status).toBe(200);
    expect(JSON.parse(invalid.text)).toMatchObject([
      { jsonrpc: "2.0", id: null, error: { code: -32600 } },
      { jsonrpc: "2.0", id: null, error: { code: -32600 } },
    ]);
  });

  it("echoes every id it accepts as the same text: strings, null and integers up to 2^53 - 1", async () => {
    for (const id of ['"a\\"b"', '"0x1"', "null", "0", "-7", "9007199254740991", "-9007199254740991"]) {
      const answer = await rpc(withId(id));
      expect(answer, id).toEqual({ status: 200, text: `{"jsonrpc":"2.0","id":${id},"result":"0x4d"}` });
    }
  });

  it("refuses, with id null, an id a double cannot carry exactly and an id that is not a string, number or null; the batch's other elements are answered", async () => {
    // Mutation: ids accepted by Number.isFinite, or any value taken as id null, answer big ids
    // as 1.2345678901234568e+29 and forward the object id.
    const before = counter.calls;
    const refused = [
      "123456789012345678901234567890",
      "9007199254740993",
      "1.5",
      "1e400",
      '{"n":1}',
      "[1]",
      "true",
    ];
    for (const id of refused) {
      const answer = await rpc(withId(id));
      expect(answer.status, id).toBe(200);
      expect(JSON.parse(answer.text), id).toMatchObject({
        jsonrpc: "2.0",
        id: null,
        error: { code: -32600 },
      });
      expect(answer.text, id).toContain('"id":null');
    }
    expect(counter.calls).toBe(before);
    const batch = await rpc(`[${refused.map((id) => withId(id)).join(",")},${withId("8")}]`);
    const answers = JSON.parse(batch.text) as { id: unknown; error?: { code: number }; result?: unknown }[];
    expect(answers).toHaveLength(refused.length + 1);
    expect(answers.slice(0, -1).every((item) => item.id === null && item.error?.code === -32600)).toBe(true);
    expect(answers.at(-1)).toEqual({ jsonrpc: "2.0", id: 8, result: "0x4d" });
  });
});
