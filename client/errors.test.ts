import { describe, expect, it } from "vitest";
import { ERROR_STATUS, type ErrorCode } from "../shared/error-codes.ts";
import { errorFromEnvelope, GatewayError, InsufficientFunds, RateLimited } from "./errors.ts";

function answered(code: string, status: number): GatewayError {
  return errorFromEnvelope(
    status,
    { error: { code, message: `refused: ${code}`, request_id: "req_1" } },
    null,
  );
}

describe("the client's error classes over the service's codes", () => {
  it.each(Object.entries(ERROR_STATUS) as [ErrorCode, number][])(
    "%s (%i) gets a class of its own family, named in the CLI's help",
    (code, status) => {
      const error = answered(code, status);
      expect(error.code).toBe(code);
      expect(error.status).toBe(status);
      expect(error.constructor).not.toBe(GatewayError);
      const family = (error.constructor as typeof GatewayError).family;
      // The payer-side refusals are listed as one "x402_*" entry; their daily limit is a RateLimited.
      expect(family).toContain(code.startsWith("x402_") && !(error instanceof RateLimited) ? "x402_*" : code);
    },
  );

  it.each([
    ["payload_too_large", 413, "ValidationFailed", 6],
    ["headers_too_large", 431, "ValidationFailed", 6],
    ["chain_unavailable", 503, "ServiceUnavailable", 19],
  ] as const)("%s (%i) is a %s, CLI exit %i", (code, status, name, exitCode) => {
    const error = answered(code, status);
    expect(error.name).toBe(name);
    expect(error.exitCode).toBe(exitCode);
    expect(error.message).toBe(`refused: ${code}`);
    expect(error.requestId).toBe("req_1");
  });

  // Mutation: an accessor that reads the wei fields (or none) fails this.
  it("insufficient_funds: its figures in 6-decimal units, as bigints", () => {
    const error = errorFromEnvelope(
      422,
      {
        error: {
          code: "insufficient_funds",
          message: "the wallet cannot pay",
          request_id: "req_2",
          needed_units: "1000042",
          available_units: "999",
          needed_wei: "1000042000000000000",
          available_wei: "999500000000000",
        },
      },
      null,
    );
    expect(error).toBeInstanceOf(InsufficientFunds);
    const refused = error as InsufficientFunds;
    expect([refused.neededUnits, refused.availableUnits]).toEqual([1_000_042n, 999n]);
    expect(refused.body.available_wei).toBe("999500000000000");
  });
});
