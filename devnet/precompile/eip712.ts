/**
 * EIP-712 hashing of TransferWithAuthorization under the NativeTransferAuth domain
 * (SPEC "x402 objects": name USDC, version 2, chainId 77, verifyingContract = the precompile).
 */
import { concatBytes } from "@ethereumjs/util";
import { keccak_256 } from "@noble/hashes/sha3";
import { EIP712_DOMAIN_NAME, EIP712_DOMAIN_VERSION } from "../../shared/constants.ts";
import { encodeAddress, encodeUint } from "./abi-words.ts";

const utf8 = (text: string): Uint8Array => new TextEncoder().encode(text);

const DOMAIN_TYPEHASH = keccak_256(
  utf8("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)"),
);
export const TRANSFER_WITH_AUTHORIZATION_TYPEHASH = keccak_256(
  utf8(
    "TransferWithAuthorization(address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce)",
  ),
);

export function domainSeparator(chainId: bigint, verifyingContract: Uint8Array): Uint8Array {
  return keccak_256(
    concatBytes(
      DOMAIN_TYPEHASH,
      keccak_256(utf8(EIP712_DOMAIN_NAME)),
      keccak_256(utf8(EIP712_DOMAIN_VERSION)),
      encodeUint(chainId),
      encodeAddress(verifyingContract),
    ),
  );
}

/**
 * The digest a payer signs. `encodedFields` is abi.encode(from, to, value, validAfter,
 * validBefore, nonce): exactly the first six argument words of both transferWithAuthorization
 * variants once their address words are known to be clean, so the calldata is hashed as it stands.
 */
export function authorizationDigest(separator: Uint8Array, encodedFields: Uint8Array): Uint8Array {
  const structHash = keccak_256(concatBytes(TRANSFER_WITH_AUTHORIZATION_TYPEHASH, encodedFields));
  return keccak_256(concatBytes(Uint8Array.of(0x19, 0x01), separator, structHash));
}
