import { describe, expect, it } from "vitest";
import { inheritedListenFd } from "./socket-activation.ts";

describe("inheritedListenFd (sd_listen_fds)", () => {
  it("is descriptor 3 when LISTEN_PID names this process and one socket was handed over", () => {
    expect(inheritedListenFd({ LISTEN_PID: "4242", LISTEN_FDS: "1" }, 4242)).toBe(3);
  });

  it("is none without the variables, with none handed over, or when they were meant for another process", () => {
    expect(inheritedListenFd({}, 4242)).toBeUndefined();
    expect(inheritedListenFd({ LISTEN_PID: "4242", LISTEN_FDS: "0" }, 4242)).toBeUndefined();
    expect(inheritedListenFd({ LISTEN_FDS: "1" }, 4242)).toBeUndefined();
    expect(inheritedListenFd({ LISTEN_PID: "4241", LISTEN_FDS: "1" }, 4242)).toBeUndefined();
  });

  it("stops the start when more than one socket was handed over", () => {
    expect(() => inheritedListenFd({ LISTEN_PID: "4242", LISTEN_FDS: "2" }, 4242)).toThrow(
      "LISTEN_FDS: the origin serves one socket; 2 were handed over",
    );
  });
});
