import type { Context } from "hono";
import { HEADER_REGISTRATION } from "../../shared/constants.ts";
import { err, ok, type Result } from "../../shared/result.ts";
import { bodyIncompleteError, readBodyLimited } from "../http/read-body.ts";

/** `{}` with room for whitespace; anything longer is not a registration body. */
const MAX_BODY_BYTES = 1024;
const UTF8 = new TextDecoder("utf-8", { fatal: true });

export type RequestShapeRefusal = { code: "validation_failed" | "payload_too_large"; message: string };

export type RequestShapeResult = Result<void, RequestShapeRefusal>;

/**
 * `Content-Type: application/json`, `X-SVC-Registration: 1`, body `{}`
 * (docs/api.md#registration-what-a-request-must-be). The client chooses nothing (wallet,
 * capabilities, secret), so any field is refused rather than ignored.
 */
export async function checkRequestShape(c: Context): Promise<RequestShapeResult> {
  const mediaType = (c.req.header("content-type") ?? "").split(";")[0]?.trim().toLowerCase();
  if (mediaType !== "application/json")
    return err({ code: "validation_failed", message: "Content-Type must be application/json" });
  if (c.req.header(HEADER_REGISTRATION)?.trim() !== "1") {
    return err({ code: "validation_failed", message: "X-SVC-Registration: 1 is required" });
  }
  const read = await readBodyLimited(c, MAX_BODY_BYTES);
  // Thrown as read-body.ts builds it: its answer also closes the connection.
  if (!read.ok && read.error === "incomplete") throw bodyIncompleteError();
  if (!read.ok)
    return err({
      code: "payload_too_large",
      message: `the body must be {} (at most ${MAX_BODY_BYTES} bytes)`,
    });
  let body: unknown;
  try {
    body = JSON.parse(UTF8.decode(read.value));
  } catch {
    return err({ code: "validation_failed", message: "the body must be {}" });
  }
  if (body === null || typeof body !== "object" || Array.isArray(body) || Object.keys(body).length > 0) {
    return err({ code: "validation_failed", message: "the body must be {}: registration takes no fields" });
  }
  return ok(undefined);
}
