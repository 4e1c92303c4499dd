/**
 * Key binding applies on every signing path (docs/enclave.md#the-enclaves-signing-policy). The
 * enclave refuses a key whose address is not the identity's assigned wallet (REFUSAL_DETAILS
 * `key_binding`), or a payout to a wallet that is not one of its agent keys (`faucet_recipient`);
 * the gateway answers both with this one error. Nothing was signed, and retrying changes nothing:
 * the identity row points at another key than its wallet's, which only an operator can look into.
 */
export const KEY_BINDING_MISMATCH = {
  code: "agent_key_binding_mismatch",
  message:
    "this token's wallet and the signing key of its identity disagree; nothing was signed. An operator must look at the identity",
} as const;

/**
 * The enclave answered `key_purpose_mismatch` without naming a sealed bound: it holds no key of the
 * op's namespace under the ref the database stores (the enclave gives "no such key" and "another
 * namespace" one answer, docs/security.md, and the refs the origin sends are always of the op's
 * namespace). Not a state that passes: the enclave in use is not the one these wallets were made
 * in, and only a restore of its keys from the backups brings them back, so a retry is no use.
 */
export function keyUnavailable(holder: "wallet" | "treasury"): {
  code: "agent_key_unavailable";
  message: string;
} {
  const whose = holder === "wallet" ? "this token's wallet" : "the faucet treasury";
  return {
    code: "agent_key_unavailable",
    message: `the signer does not hold the key of ${whose}; nothing was signed, and a retry cannot succeed until an operator restores the enclave's keys from their backups (docs/operations.md, "Disaster recovery")`,
  };
}
