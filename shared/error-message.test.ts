import { describe, expect, it } from "vitest";
import { errorMessage } from "./error-message.ts";

describe("errorMessage", () => {
  it.each([
    ["an Error gives its message", new Error("socket closed"), "socket closed"],
    ["an Error subclass gives its message", new TypeError("not a function"), "not a function"],
    ["a thrown string stays itself", "plain refusal", "plain refusal"],
    ["a thrown number is printed", 42, "42"],
    ["undefined is printed", undefined, "undefined"],
  ])("%s", (_name, thrown, message) => {
    expect(errorMessage(thrown)).toBe(message);
  });
});
