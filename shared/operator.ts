/**
 * An operator signed in to the console with an enrolled passkey
 * (docs/operations.md#signing-in-with-a-passkey): the name the passkey was registered under and its
 * key id. A change made under the shared admin tokens, or by the CLI, has none (null).
 */
export type Operator = { name: string; keyId: string };
