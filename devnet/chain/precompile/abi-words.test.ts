import { hexToBytes } from "@ethereumjs/util";
import { encodeAbiParameters, type Hex, toHex } from "viem";
import { describe, expect, it } from "vitest";
import { AbiArgs, encodeErrorString, encodeString } from "./abi-words.ts";

const args = (hex: Hex): AbiArgs => new AbiArgs(hexToBytes(hex));

describe("AbiArgs", () => {
  it("reads what viem encodes, ignoring trailing bytes", () => {
    const encoded = encodeAbiParameters(
      [{ type: "address" }, { type: "uint8" }, { type: "bytes" }, { type: "uint256" }],
      ["0x00000000000000000000000000000000000000aa", 28, "0x010203", 7n],
    );
    const decoded = args(`${encoded}deadbeef`);
    expect(toHex(decoded.address(0)!)).toBe("0x00000000000000000000000000000000000000aa");
    expect(decoded.uint8(1)).toBe(28);
    expect(toHex(decoded.bytes(2)!)).toBe("0x010203");
    expect(decoded.uint(3)).toBe(7n);
    expect(decoded.word(6)).toBeUndefined(); // the four trailing bytes are not a word
  });

  it("refuses what Solidity's decoder refuses", () => {
    expect(args(`0x01${"00".repeat(11)}${"aa".repeat(20)}`).address(0)).toBeUndefined();
    expect(args(toHex(256n, { size: 32 })).uint8(0)).toBeUndefined();
    expect(args(toHex(32n, { size: 32 })).bytes(0)).toBeUndefined();
    expect(
      args(`${toHex(32n, { size: 32 })}${toHex(33n, { size: 32 }).slice(2)}${"00".repeat(32)}`).bytes(0),
    ).toBeUndefined();
    expect(args("0x1234").uint(0)).toBeUndefined();
  });
});

describe("encoders", () => {
  it("encode strings and Error(string) as Solidity does", () => {
    const text = "NativeTransferAuth: authorization is used";
    expect(toHex(encodeString(text))).toBe(encodeAbiParameters([{ type: "string" }], [text]));
    expect(toHex(encodeErrorString(text))).toBe(
      `0x08c379a0${encodeAbiParameters([{ type: "string" }], [text]).slice(2)}`,
    );
  });
});
