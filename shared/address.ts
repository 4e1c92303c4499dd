/**
 * EIP-55 addresses hashed with shared/keccak.ts: the native Keccak where it loads. viem's
 * `getAddress` and `isAddress` hash with its JavaScript Keccak: about a fifth of the enclave's
 * generate and verify of a key batch, and most of the origin's parse of their answers, which checks
 * each key's address (docs/performance.md, "Provisioning and the key pool"). Same answers as
 * viem's; runtime-neutral.
 */
import type { Address } from "viem";
import { keccak256 } from "./keccak.ts";

const ADDRESS_PATTERN = /^0x[0-9a-fA-F]{40}$/;

/** The EIP-55 form of a 20-byte hex address, in any case: a hex digit is upper case where the hash's nibble is 8 or more. */
export function checksumAddress(address: string): Address {
  if (!ADDRESS_PATTERN.test(address)) throw new Error(`not a 20-byte hex address: ${address}`);
  const lower = address.slice(2).toLowerCase();
  const ascii = new Uint8Array(40);
  for (let i = 0; i < 40; i++) ascii[i] = lower.charCodeAt(i);
  const hash = keccak256(ascii);
  let out = "0x";
  for (let i = 0; i < 40; i++) {
    const nibble = i % 2 === 0 ? hash[i >> 1]! >> 4 : hash[i >> 1]! & 0x0f;
    out += nibble >= 8 ? lower[i]!.toUpperCase() : lower[i];
  }
  return out as Address;
}

/**
 * The mixed-case addresses found to be their checksum lately, oldest first. A process sees the same
 * few again and again (a node's payee, its agents' wallets, the keys the enclave signs for), and
 * each check is a hash: about 5 µs here, two in every x402 authorization's request to the enclave
 * and two in its answer, most of what checking either costs.
 */
const knownChecksummed = new Set<string>();
const KNOWN_CHECKSUMMED_AT_MOST = 1024;

/** A 20-byte hex address whose letters are all lower case or, when mixed, its EIP-55 checksum. */
export function isChecksummedOrLowerAddress(value: string): value is Address {
  if (!ADDRESS_PATTERN.test(value)) return false;
  if (value.toLowerCase() === value || knownChecksummed.has(value)) return true;
  if (checksumAddress(value) !== value) return false;
  if (knownChecksummed.size >= KNOWN_CHECKSUMMED_AT_MOST) {
    for (const oldest of knownChecksummed) {
      knownChecksummed.delete(oldest);
      break;
    }
  }
  knownChecksummed.add(value);
  return true;
}
