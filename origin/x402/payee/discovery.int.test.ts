import { HTTPFacilitatorClient } from "@x402/core/server";
import type { PaymentPayload } from "@x402/core/types";
import { withBazaar } from "@x402/extensions/bazaar";
import type { Address, Hex, PrivateKeyAccount } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { newAccount, publicClientFor } from "../../../devnet/testing.ts";
import { useStackEdge } from "../../../testing/edge.ts";
import { runTool } from "../../../testing/run-tool.ts";
import { useMoneyStack } from "../../../testing/stack.ts";
import { envelope, fundedPayer, pay, paymentHeader, quote } from "../../../testing/x402-payer.ts";
import { X402_REASONS } from "../reasons.ts";

// Discovery (docs/x402.md#discovery-the-resource-catalogue) through the edge, every part real (the
// edge worker in Miniflare, the origin, the enclave, the devnet, Postgres), read with the official
// `withBazaar(new HTTPFacilitatorClient({url}))` of @x402/extensions unchanged: the demo is listed
// and found by a word of its description; a resource whose payment was only verified, or refused
// by the chain's facts, never appears; one whose payment settled through /settle does; the
// operator's registrations (npm run x402-resources) are listed too.
const EDGE_SECRET = "x402-discovery-secret-0123456789abcdef0123456789ab";
const AMOUNT = 10_000n;
const payTo = newAccount().address.toLowerCase() as Address;

const stack = useMoneyStack(
  {
    x402: { amountUnits: AMOUNT, payTo },
    env: { AGENT_EDGE_SHARED_SECRET: EDGE_SECRET, AGENT_X402_RECEIPT_TIMEOUT_MS: "60000" },
  },
  { timeoutMs: 180_000 },
);
const edge = useStackEdge(stack, EDGE_SECRET);
let facilitatorUrl: string;
let demoUrl: string;

beforeAll(() => {
  facilitatorUrl = `${edge.url}/77/x402/facilitator`;
  demoUrl = `${edge.url}/77/x402/demo`;
});

const bazaar = () => withBazaar(new HTTPFacilitatorClient({ url: facilitatorUrl })).extensions.bazaar;
const facilitator = () => new HTTPFacilitatorClient({ url: facilitatorUrl });

/** A payment for the demo's terms that names another resource, as a seller using this facilitator sends it. */
async function paymentFor(
  account: PrivateKeyAccount,
  resource: NonNullable<PaymentPayload["resource"]>,
): Promise<PaymentPayload> {
  return { ...(await envelope(demoUrl, account)), resource };
}

/** Every resource URL the catalogue lists, page by page as a client reads it. */
async function everyListed(): Promise<string[]> {
  const urls: string[] = [];
  for (let offset = 0; ; offset += 2) {
    const page = await bazaar().listResources({ limit: 2, offset });
    urls.push(...page.items.map((item) => item.resource));
    if (offset + 2 >= page.pagination.total) return urls;
  }
}

describe("discovery through the edge, read with withBazaar(HTTPFacilitatorClient)", () => {
  it("lists the demo under its public URL, in the client's shape, and finds it by a word of its description", async () => {
    const listed = await bazaar().listResources();
    const { accepted, resource } = await quote(demoUrl);
    expect(resource?.url).toBe(demoUrl);
    expect(listed).toEqual({
      x402Version: 2,
      items: [
        {
          resource: demoUrl,
          type: "http",
          x402Version: 2,
          accepts: [accepted],
          lastUpdated: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
          description: resource?.description,
          mimeType: "application/json",
        },
      ],
      pagination: { limit: 20, offset: 0, total: 1 },
    });
    // Mutation: matching words only in the URL finds nothing here.
    const found = await bazaar().search({ query: "PAID answer" });
    expect(found).toEqual({
      x402Version: 2,
      resources: [listed.items[0]],
      partialResults: false,
      pagination: { limit: 20, cursor: null },
    });
    expect((await bazaar().search({ query: "paid weather" })).resources).toEqual([]);
    // A filter on another network or payee keeps nothing; this node's own keep the demo.
    expect((await bazaar().listResources({ network: "eip155:8453" })).items).toEqual([]);
    expect((await bazaar().listResources({ payTo: newAccount().address })).items).toEqual([]);
    expect(
      (await bazaar().listResources({ type: "http", scheme: "exact", network: "eip155:77", payTo })).items,
    ).toHaveLength(1);
  });

  it("never lists a resource whose payment was only verified, or that the chain's facts refused", async () => {
    const verifiedOnly = await paymentFor(await fundedPayer(stack.devnet.url), {
      url: "https://verified-only.example/quotes",
      description: "Verified never settled",
      mimeType: "application/json",
    });
    expect(await facilitator().verify(verifiedOnly, verifiedOnly.accepted)).toMatchObject({ isValid: true });
    // Too poor for the price: the claim is refused before anything is signed.
    const poor = await paymentFor(await fundedPayer(stack.devnet.url, AMOUNT - 1n), {
      url: "https://refused.example/quotes",
      description: "Refused never settled",
      mimeType: "application/json",
    });
    const refused = await facilitator()
      .settle(poor, poor.accepted)
      .catch((error: { errorReason?: string }) => error);
    expect(refused).toMatchObject({ errorReason: X402_REASONS.insufficientBalance });
    // Mutation: the follower cataloguing every recorded transaction (or the claim writing the
    // catalogue) lists the verified one once any settlement is mined; one is, here.
    const settled = await paymentFor(await fundedPayer(stack.devnet.url), {
      url: "https://settled-alongside.example/",
      description: "Settled beside the others",
      mimeType: "text/plain",
    });
    expect(await facilitator().settle(settled, settled.accepted)).toMatchObject({ success: true });
    const listed = await everyListed();
    expect(listed).toContain("https://settled-alongside.example/");
    expect(listed).not.toContain("https://verified-only.example/quotes");
    expect(listed).not.toContain("https://refused.example/quotes");
    expect((await bazaar().search({ query: "never settled" })).resources).toEqual([]);
  });

  it("lists a resource once a payment naming it has settled through /settle, with the seller's description", async () => {
    const payload = await paymentFor(await fundedPayer(stack.devnet.url), {
      url: "https://seller.example/weather?city=Lisbon",
      description: "Hourly weather forecast",
      mimeType: "application/json",
    });
    // Mutation: the follower dropped from the outbox's statements leaves it unlisted.
    expect((await bazaar().search({ query: "forecast" })).resources).toEqual([]);
    const settled = await facilitator().settle(payload, payload.accepted);
    expect(settled).toMatchObject({ success: true });
    const receipt = await publicClientFor(stack.devnet.url).getTransactionReceipt({
      hash: settled.transaction as Hex,
    });
    expect(receipt.status).toBe("success");
    // Mutation: LIKE in place of ILIKE finds nothing ("lisbon" is only in the URL, capitalised).
    const found = await bazaar().search({ query: "Weather LISBON" });
    expect(found.resources).toEqual([
      {
        resource: "https://seller.example/weather?city=Lisbon",
        type: "http",
        x402Version: 2,
        accepts: [payload.accepted],
        lastUpdated: expect.any(String),
        description: "Hourly weather forecast",
        mimeType: "application/json",
      },
    ]);
    // Paid again: still one entry.
    const again = await paymentFor(await fundedPayer(stack.devnet.url), payload.resource!);
    expect(await facilitator().settle(again, again.accepted)).toMatchObject({ success: true });
    expect((await everyListed()).filter((url) => url.includes("seller.example"))).toHaveLength(1);
  });

  it("settles a payment whose resource's description holds a control character, and lists nothing for it", async () => {
    // A NUL reached the settlement's claim row, which Postgres refused: 500, nothing settled.
    for (const description of ["Rainfall\u0000 forecast", "Rainfall \u001b[31mforecast"]) {
      const payload = await paymentFor(await fundedPayer(stack.devnet.url), {
        url: "https://seller.example/rainfall",
        description,
        mimeType: "application/json",
      });
      const settled = await facilitator().settle(payload, payload.accepted);
      expect(settled).toMatchObject({ success: true });
      const receipt = await publicClientFor(stack.devnet.url).getTransactionReceipt({
        hash: settled.transaction as Hex,
      });
      expect(receipt.status).toBe("success");
    }
    expect((await everyListed()).filter((url) => url.includes("rainfall"))).toEqual([]);
  });

  it("settles a payment whose resource's description holds a lone surrogate, lists nothing for it, and a demo payment settling beside it is paid", async () => {
    // Postgres's JSON refuses a lone surrogate's escape: reaching the batch's claim statement, it
    // failed the claim of every payment of the batch, the demo's own payments beside it included.
    for (const description of ["Snowfall \ud800 forecast", "Snowfall \udfff"]) {
      const payload = await paymentFor(await fundedPayer(stack.devnet.url), {
        url: "https://seller.example/snowfall",
        description,
        mimeType: "application/json",
      });
      // Demo payments sent together with it, so that some share its settle batch.
      const demoPayments = await Promise.all(
        Array.from({ length: 4 }, async () =>
          paymentHeader(await envelope(demoUrl, await fundedPayer(stack.devnet.url))),
        ),
      );
      const [settled, ...demoAnswers] = await Promise.all([
        facilitator()
          .settle(payload, payload.accepted)
          .catch((error: Error) => error.message),
        ...demoPayments.map((signature) => pay(demoUrl, signature)),
      ]);
      expect(settled).toMatchObject({ success: true });
      expect(demoAnswers.map((answer) => `${answer.status} ${answer.body.error ?? "paid"}`)).toEqual(
        Array(4).fill("200 paid"),
      );
    }
    expect((await everyListed()).filter((url) => url.includes("snowfall"))).toEqual([]);
  });

  it("lists what the operator registers with npm run x402-resources, after the demo, and pages through it all", async () => {
    const added = await runTool(
      "ops/x402-resources.ts",
      ["add", "--url", "https://registered.example/tides", "--description", "Tide tables for sailors"],
      { env: { DATABASE_URL: stack.db.url, LOG_LEVEL: "silent" } },
    );
    expect(added.stderr).toBe("");
    expect(added.code).toBe(0);
    // Mutation: the page query ignoring `offset` repeats the first page, and misses this one.
    const listed = await everyListed();
    expect(listed[0]).toBe(demoUrl);
    expect(listed).toContain("https://registered.example/tides");
    expect(new Set(listed).size).toBe(listed.length);
    const total = (await bazaar().listResources()).pagination.total;
    expect(listed).toHaveLength(total);
    // A search a page at a time, by the cursor each page gives.
    const first = await bazaar().search({ query: "example", limit: 1 });
    expect(first.resources).toHaveLength(1);
    expect(first.pagination).toEqual({ limit: 1, cursor: "1" });
    const second = await bazaar().search({ query: "example", limit: 1, cursor: first.pagination!.cursor! });
    expect(second.resources[0]!.resource).not.toBe(first.resources[0]!.resource);
    expect((await bazaar().search({ query: "sailors" })).resources.map((item) => item.resource)).toEqual([
      "https://registered.example/tides",
    ]);
  });

  it("refuses a query out of its bounds with 400 validation_failed naming the parameter", async () => {
    // Mutation: parseSearchQuery without its length bound answers the long query 200.
    await expect(bazaar().search({ query: "q".repeat(201) })).rejects.toThrow(
      /failed \(400\).*validation_failed.*over 200 characters/,
    );
    await expect(bazaar().listResources({ limit: 0 })).rejects.toThrow(/failed \(400\).*limit/);
    await expect(bazaar().listResources({ offset: -1 })).rejects.toThrow(/failed \(400\).*offset/);
    const noQuery = await fetch(`${facilitatorUrl}/discovery/search`);
    expect(noQuery.status).toBe(400);
    expect(await noQuery.json()).toMatchObject({ error: { code: "validation_failed" } });
    // A NUL, which Postgres text cannot hold: refused, not a failed query (500).
    await expect(bazaar().search({ query: "demo\u0000" })).rejects.toThrow(
      /failed \(400\).*validation_failed.*control characters/,
    );
  });
});

describe("with AGENT_X402_ENABLED off", () => {
  it("discovery is 404 like every x402 route", async () => {
    const off = await stack.startOrigin({ AGENT_X402_ENABLED: "false" });
    const answers = await Promise.all([
      fetch(`${off.base}/x402/facilitator/discovery/resources`),
      fetch(`${off.base}/x402/facilitator/discovery/search?query=demo`),
    ]);
    expect(answers.map((answer) => answer.status)).toEqual([404, 404]);
    expect((await fetch(`${stack.origin.base}/x402/facilitator/discovery/resources`)).status).toBe(200);
  });
});
