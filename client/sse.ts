/**
 * A parser of Server-Sent Events (the WHATWG HTML standard's "event stream interpretation"), fed
 * the decoded text of a response body in whatever pieces the network hands over. The client
 * reads the agent's event stream over fetch with it, so the package needs no EventSource.
 */

/** One dispatched message. */
export type SseMessage = {
  kind: "message";
  /** The `event:` field; `message` when the message named none. */
  event: string;
  /** The `data:` lines joined by newlines. */
  data: string;
  /**
   * The stream's last event id when the message was dispatched: its own `id:` field, or the one
   * before it (a message without an id keeps the last one, as an EventSource does).
   */
  lastEventId: string;
};

/** A `retry:` field: how long to wait before reconnecting, in milliseconds. */
export type SseRetry = { kind: "retry"; ms: number };

export type SseItem = SseMessage | SseRetry;

export type SseParser = {
  /** Parses the next piece of the stream's text; returns what it completed, in order. */
  push(text: string): SseItem[];
};

/**
 * The most characters one message may take, its lines being read included: the service's largest
 * event is a few KiB, so a stream past this (a line that never ends, data lines without the blank
 * line) is not the service's, and reading on would hold it all in memory.
 */
export const MAX_MESSAGE_CHARS = 1 << 20;

/** What push throws for a message over `maxMessageChars`: the stream counts as broken. */
export class SseMessageTooLong extends Error {
  constructor(maxMessageChars: number) {
    super(`an event stream message ran over ${maxMessageChars} characters without ending`);
    this.name = "SseMessageTooLong";
  }
}

export function createSseParser(maxMessageChars = MAX_MESSAGE_CHARS): SseParser {
  let pending = "";
  // A piece that ended with CR: an LF opening the next piece belongs to the same line break.
  let afterCr = false;
  let eventType = "";
  let data = "";
  let hasData = false;
  let lastEventId = "";

  const line = (text: string, out: SseItem[]): void => {
    if (text === "") {
      // A blank line dispatches; a message without data is dropped, its id kept (the standard).
      if (hasData) {
        out.push({ kind: "message", event: eventType || "message", data, lastEventId });
      }
      eventType = "";
      data = "";
      hasData = false;
      return;
    }
    if (text.startsWith(":")) return; // a comment (the service's `: ping`)
    const colon = text.indexOf(":");
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        eventType = value;
        return;
      case "data":
        data = hasData ? `${data}\n${value}` : value;
        hasData = true;
        return;
      case "id":
        if (!value.includes("\0")) lastEventId = value;
        return;
      case "retry":
        if (/^\d+$/.test(value)) out.push({ kind: "retry", ms: Number(value) });
        return;
      default:
        return; // an unknown field is ignored
    }
  };

  return {
    push(text) {
      const out: SseItem[] = [];
      let piece = text;
      if (afterCr && piece.startsWith("\n")) piece = piece.slice(1);
      afterCr = false;
      const buffer = pending + piece;
      let start = 0;
      for (let at = 0; at < buffer.length; at++) {
        const char = buffer.charCodeAt(at);
        if (char !== 10 && char !== 13) continue;
        line(buffer.slice(start, at), out);
        if (char === 13) {
          if (at + 1 === buffer.length) afterCr = true;
          else if (buffer.charCodeAt(at + 1) === 10) at++;
        }
        start = at + 1;
      }
      pending = buffer.slice(start);
      if (pending.length + data.length + eventType.length > maxMessageChars) {
        throw new SseMessageTooLong(maxMessageChars);
      }
      return out;
    },
  };
}
