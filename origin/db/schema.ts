/** The whole database schema, split by area under schema/. */
export * from "./schema/actions.ts";
export * from "./schema/events.ts";
export * from "./schema/identities.ts";
export * from "./schema/keypool.ts";
export * from "./schema/passkeys.ts";
export * from "./schema/policies.ts";
export * from "./schema/registration.ts";
export * from "./schema/state-counts.ts";
export * from "./schema/transactions.ts";
export * from "./schema/webhooks.ts";
export * from "./schema/x402.ts";
export * from "./schema/x402-resources.ts";
