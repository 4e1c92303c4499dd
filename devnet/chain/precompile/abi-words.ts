/**
 * Strict ABI decoding of the precompile's fixed argument lists, and the few encoders its results
 * need. Strict the way Solidity's decoder is: an address word with dirty high bytes, a uint8 above
 * 255 or a `bytes` pointer outside the calldata is malformed (the call reverts), while trailing
 * calldata is ignored (x402 facilitators may append a data suffix).
 */
import { bigIntToBytes, bytesToBigInt, concatBytes, setLengthLeft, setLengthRight } from "@ethereumjs/util";

const WORD = 32;

export class AbiArgs {
  readonly #data: Uint8Array;

  /** `data` is the calldata after the four-byte selector. */
  constructor(data: Uint8Array) {
    this.#data = data;
  }

  /** The raw 32-byte word of argument `index` (a view, not a copy). */
  word(index: number): Uint8Array | undefined {
    const start = index * WORD;
    if (start + WORD > this.#data.length) return undefined;
    return this.#data.subarray(start, start + WORD);
  }

  /** The first `count` argument words as one view: the static head of the call. */
  head(count: number): Uint8Array | undefined {
    if (count * WORD > this.#data.length) return undefined;
    return this.#data.subarray(0, count * WORD);
  }

  uint(index: number): bigint | undefined {
    const word = this.word(index);
    return word === undefined ? undefined : bytesToBigInt(word);
  }

  uint8(index: number): number | undefined {
    const value = this.uint(index);
    return value === undefined || value > 255n ? undefined : Number(value);
  }

  /** The 20 address bytes of argument `index`; undefined when the top 12 bytes are not zero. */
  address(index: number): Uint8Array | undefined {
    const word = this.word(index);
    if (word === undefined) return undefined;
    for (let i = 0; i < 12; i++) if (word[i] !== 0) return undefined;
    return word.subarray(12);
  }

  /** A dynamic `bytes` argument: its head word is an offset to a length word and the content. */
  bytes(index: number): Uint8Array | undefined {
    const offset = this.uint(index);
    if (offset === undefined || offset > BigInt(this.#data.length)) return undefined;
    const lengthStart = Number(offset);
    if (lengthStart + WORD > this.#data.length) return undefined;
    const length = bytesToBigInt(this.#data.subarray(lengthStart, lengthStart + WORD));
    const contentStart = lengthStart + WORD;
    if (length > BigInt(this.#data.length - contentStart)) return undefined;
    return this.#data.subarray(contentStart, contentStart + Number(length));
  }
}

export function encodeUint(value: bigint): Uint8Array {
  return setLengthLeft(bigIntToBytes(value), WORD);
}

export function encodeBool(value: boolean): Uint8Array {
  return encodeUint(value ? 1n : 0n);
}

/** Left-pads an address to a word, as event topics and abi.encode carry it. */
export function encodeAddress(address: Uint8Array): Uint8Array {
  return setLengthLeft(address, WORD);
}

/** abi.encode(string) as a function's only return value: offset, length, padded content. */
export function encodeString(value: string): Uint8Array {
  const content = new TextEncoder().encode(value);
  const padded = setLengthRight(content, Math.ceil(content.length / WORD) * WORD);
  return concatBytes(encodeUint(32n), encodeUint(BigInt(content.length)), padded);
}

/** Revert data of Solidity's `require(cond, reason)`: Error(string). */
export function encodeErrorString(reason: string): Uint8Array {
  return concatBytes(Uint8Array.of(0x08, 0xc3, 0x79, 0xa0), encodeString(reason));
}
