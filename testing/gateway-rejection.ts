import { GatewayError } from "agent-wallet-service/client";
import { expect } from "vitest";

/** The client's typed error a call rejected with (the test fails if it resolved or threw another). */
export async function rejection(promise: Promise<unknown>): Promise<GatewayError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  expect(error).toBeInstanceOf(GatewayError);
  return error as GatewayError;
}
