import { describe, expect, it } from "vitest";
import { encodeFrame, FrameDecoder, FrameTooLargeError, MAX_FRAME_BYTES } from "./cbor-frame.ts";

const lengthHeader = (length: number): Uint8Array => {
  const header = new Uint8Array(4);
  new DataView(header.buffer).setUint32(0, length, false);
  return header;
};

describe("frame codec", () => {
  it("prefixes one CBOR item with its 4-byte big-endian length", () => {
    const frame = encodeFrame({ v: 1 });
    expect(Array.from(frame.subarray(0, 4))).toEqual([0, 0, 0, frame.length - 4]);
    expect(new FrameDecoder().push(frame)).toEqual([{ kind: "frame", value: { v: 1 } }]);
  });

  it("decodes frames split at every byte and several frames in one chunk", () => {
    const frames = [
      encodeFrame({ id: 1, b: Uint8Array.of(1, 2, 3) }),
      encodeFrame({ id: 2, s: "x".repeat(300) }),
    ];
    const decoder = new FrameDecoder();
    const events = [];
    for (const frame of frames) for (const byte of frame) events.push(...decoder.push(Uint8Array.of(byte)));
    expect(
      events.map((event) => (event.kind === "frame" ? (event.value as { id: number }).id : event)),
    ).toEqual([1, 2]);
    const joined = new Uint8Array(frames[0]!.length + frames[1]!.length);
    joined.set(frames[0]!, 0);
    joined.set(frames[1]!, frames[0]!.length);
    expect(new FrameDecoder().push(joined)).toHaveLength(2);
  });

  it("reports an undecodable or empty frame as malformed and continues", () => {
    const decoder = new FrameDecoder();
    const garbage = Uint8Array.of(...lengthHeader(2), 0xa1, 0xff);
    const empty = lengthHeader(0);
    const events = [...decoder.push(garbage), ...decoder.push(empty), ...decoder.push(encodeFrame("ok"))];
    expect(events).toEqual([
      { kind: "malformed", reason: "undecodable" },
      { kind: "malformed", reason: "undecodable" },
      { kind: "frame", value: "ok" },
    ]);
  });

  it("treats trailing bytes after the one CBOR item as undecodable", () => {
    expect(new FrameDecoder().push(Uint8Array.of(...lengthHeader(2), 0x01, 0x02))).toEqual([
      { kind: "malformed", reason: "undecodable" },
    ]);
  });

  it("reports an oversize frame once, skips its declared bytes across chunks, then decodes the next", () => {
    const decoder = new FrameDecoder({ maxFrameBytes: 16 });
    const events = [
      ...decoder.push(lengthHeader(40)),
      ...decoder.push(new Uint8Array(25).fill(7)),
      ...decoder.push(new Uint8Array(15).fill(7)),
      ...decoder.push(encodeFrame(42)),
    ];
    expect(events).toEqual([
      { kind: "malformed", reason: "oversize" },
      { kind: "frame", value: 42 },
    ]);
  });

  it("accepts a frame of exactly the maximum and refuses to encode a larger one", () => {
    const value = new Uint8Array(MAX_FRAME_BYTES - 5); // 5 bytes of byte-string head
    const frame = encodeFrame(value);
    expect(frame.length).toBe(MAX_FRAME_BYTES + 4);
    const [event] = new FrameDecoder().push(frame);
    expect(event?.kind).toBe("frame");
    expect(() => encodeFrame(new Uint8Array(MAX_FRAME_BYTES))).toThrow(FrameTooLargeError);
  });
});
