import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import * as z from "zod";
import { AppError } from "../errors.ts";
import { parseJsonBody } from "./json-body.ts";

const schema = z.strictObject({
  to: z.string(),
  quote: z.object({ resource: z.object({ url: z.string(), mimeType: z.string().optional() }) }),
});

/** What a client is told about `body`: the 400's message, or "accepted". */
async function messageFor(body: unknown): Promise<string> {
  const app = new Hono();
  app.post("/", async (c) => {
    try {
      await parseJsonBody(c, schema);
      return c.text("accepted");
    } catch (error) {
      return c.text(error instanceof AppError ? `${error.code}: ${error.message}` : String(error));
    }
  });
  const response = await app.request("/", { method: "POST", body: JSON.stringify(body) });
  return response.text();
}

describe("parseJsonBody's messages", () => {
  it("names a missing field as required", async () => {
    expect(await messageFor({ quote: { resource: { url: "u" } } })).toBe("validation_failed: to is required");
    expect(await messageFor({ to: "a", quote: { resource: {} } })).toBe(
      "validation_failed: quote.resource.url is required",
    );
  });

  it("does not call a field that was sent, with the wrong type or null, missing", async () => {
    const wrongType = await messageFor({ to: 5, quote: { resource: { url: "u" } } });
    expect(wrongType).toMatch(/^validation_failed: to: /);
    expect(wrongType).not.toContain("required");
    const sentNull = await messageFor({ to: "a", quote: { resource: { url: "u", mimeType: null } } });
    expect(sentNull).toMatch(/^validation_failed: quote\.resource\.mimeType: /);
    expect(sentNull).not.toContain("required");
  });

  it("says the body must be an object when it is not one", async () => {
    expect(await messageFor([1])).toBe("validation_failed: the body must be a JSON object");
  });
});
