import { describe, expectTypeOf, it } from "vitest";
import type * as z from "zod";
import type {
  actionSchema,
  balanceResponseSchema,
  networkResponseSchema,
  registerResponseSchema,
} from "../shared/gateway-schemas.ts";
import type { policyCheckResponseSchema, policyResponseSchema } from "../shared/policy-schemas.ts";
import type { tokenRotationResponseSchema } from "../shared/token-schemas.ts";
import type {
  ActionView,
  BalanceResponse,
  NetworkResponse,
  PolicyCheckResult,
  PolicyResponse,
  RegisterResponse,
  TokenRotation,
} from "./wire.ts";

// The client's plain answer types against the schemas the origin answers with. Checked by the
// typecheck (`npm run typecheck`), not at run time. Mutation: a field of wire.ts renamed, made
// optional or given another type fails the typecheck here.

describe("the client's answer types are the origin's schemas", () => {
  it("action, network, balance, registration, token rotation", () => {
    expectTypeOf<ActionView>().toEqualTypeOf<z.infer<typeof actionSchema>>();
    expectTypeOf<NetworkResponse>().toEqualTypeOf<z.infer<typeof networkResponseSchema>>();
    expectTypeOf<BalanceResponse>().toEqualTypeOf<z.infer<typeof balanceResponseSchema>>();
    expectTypeOf<RegisterResponse>().toEqualTypeOf<z.infer<typeof registerResponseSchema>>();
    expectTypeOf<TokenRotation>().toEqualTypeOf<z.infer<typeof tokenRotationResponseSchema>>();
  });
  it("the spending policy and its check call", () => {
    expectTypeOf<PolicyResponse>().toEqualTypeOf<z.infer<typeof policyResponseSchema>>();
    expectTypeOf<PolicyCheckResult>().toEqualTypeOf<z.infer<typeof policyCheckResponseSchema>>();
  });
});
