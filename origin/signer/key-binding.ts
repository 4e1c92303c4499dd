/**
 * SPEC "x402 authorize": key-binding checks apply, and on every signing path. The enclave refuses
 * a key whose address is not the identity's assigned wallet (REFUSAL_DETAILS `key_binding`), or a
 * payout to a wallet that is not one of its agent keys (`faucet_recipient`); the gateway answers
 * both with this one error. Nothing was signed, and retrying changes nothing: the identity row
 * points at another key than its wallet's, which only an operator can look into.
 */
export const KEY_BINDING_MISMATCH = {
  code: "agent_key_binding_mismatch",
  message:
    "this token's wallet and the signing key of its identity disagree; nothing was signed. An operator must look at the identity",
} as const;
