import { describe, expect, it } from "vitest";
import { createSseParser, type SseItem, SseMessageTooLong } from "./sse.ts";

/** Every item of `pieces` fed one after another. */
function parse(...pieces: string[]): SseItem[] {
  const parser = createSseParser();
  return pieces.flatMap((piece) => parser.push(piece));
}

const message = (event: string, data: string, lastEventId: string): SseItem => ({
  kind: "message",
  event,
  data,
  lastEventId,
});

describe("the client's Server-Sent Events parser", () => {
  it.each([
    ["LF", "id: 7\nevent: action.signed\ndata: {}\n\n"],
    ["CRLF", "id: 7\r\nevent: action.signed\r\ndata: {}\r\n\r\n"],
    ["CR", "id: 7\revent: action.signed\rdata: {}\r\r"],
  ])("reads a message whose lines end with %s", (_name, text) => {
    expect(parse(text)).toEqual([message("action.signed", "{}", "7")]);
  });

  // Mutation: treating the CR at a piece's end and the LF opening the next as two line breaks
  // (a blank line) dispatches the message early, without its data, and fails this.
  it("keeps a CRLF split between two pieces one line break", () => {
    expect(parse("id: 7\r", "\nevent: a\r", "\ndata: x\r", "\n\r", "\n")).toEqual([message("a", "x", "7")]);
  });

  it("reads a message cut anywhere, one character at a time", () => {
    const text = 'id: 12\nevent: action.confirmed\ndata: {"a":1}\n\n';
    expect(parse(...text.split(""))).toEqual([message("action.confirmed", '{"a":1}', "12")]);
  });

  it("joins data lines with newlines, skips comments, and strips one space after the colon only", () => {
    expect(parse(": ping\n\ndata:first\ndata:  second\n: between\ndata\n\n")).toEqual([
      message("message", "first\n second\n", ""),
    ]);
  });

  it("keeps the last id for a message without one, and ignores an id with NUL", () => {
    expect(
      parse("id: 5\ndata: a\n\n", "event: stream.closed\ndata: b\n\n", "id: 6\u0000\ndata: c\n\n"),
    ).toEqual([
      message("message", "a", "5"),
      message("stream.closed", "b", "5"),
      message("message", "c", "5"),
    ]);
  });

  it("drops a message without data, keeping its id; reports retry, ignoring one not in digits", () => {
    expect(parse("id: 9\nevent: x\n\nretry: 30000\nretry: soon\ndata: y\n\n")).toEqual([
      { kind: "retry", ms: 30_000 },
      message("message", "y", "9"),
    ]);
  });

  // Mutation: without the bound, both streams are held whole, however long they run.
  it.each([
    ["a line that never ends", ["data: ", "x".repeat(60), "x".repeat(60)]],
    ["data lines without the blank line", Array.from({ length: 60 }, () => "data: xx\n")],
  ])("throws SseMessageTooLong once one message runs over its bound: %s", (_name, pieces) => {
    const parser = createSseParser(100);
    expect(() => {
      for (const piece of pieces) parser.push(piece);
    }).toThrow(SseMessageTooLong);
  });

  it("reads a message just under its bound", () => {
    const parser = createSseParser(100);
    expect(parser.push(`data: ${"x".repeat(90)}\n\n`)).toEqual([message("message", "x".repeat(90), "")]);
  });

  it("dispatches nothing for a message not ended by a blank line yet", () => {
    expect(parse("id: 1\ndata: a\n")).toEqual([]);
  });
});
