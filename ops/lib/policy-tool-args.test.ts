import { describe, expect, it } from "vitest";
import { UsageError } from "./cli-shell.ts";
import { operatorKeyId } from "./policy-operator.ts";
import { parsePolicyToolArgs } from "./policy-tool-args.ts";

const AGENT = "0b6f5c8e-3f1a-4c2d-9e7b-1a2b3c4d5e6f";
const ACTION = "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f";

describe("npm run policy's arguments", () => {
  it.each([
    [["show", "--agent", AGENT], { command: "show", agentId: AGENT, json: false }],
    [
      ["set", "--agent", AGENT, "--file", "p.json"],
      { command: "set", file: "p.json", operatorKeyFile: undefined },
    ],
    [["freeze", "--all", "--json"], { command: "freeze", target: { all: true }, json: true }],
    [
      ["unfreeze", "--agent", AGENT, "--operator-key", "k"],
      { target: { agentId: AGENT }, operatorKeyFile: "k" },
    ],
    [["approve", "--agent", AGENT, "--action", ACTION, "--operator-key", "k"], { actionId: ACTION }],
    [["reject", "--agent", AGENT, "--action", ACTION, "--socket", "/s"], { command: "reject", socket: "/s" }],
    [
      ["enroll", "--operator-key", "k", "--policy-key", "p", "--key-id", "ops-1"],
      { keyId: "ops-1", label: undefined },
    ],
  ])("%j", (argv, expected) => {
    expect(parsePolicyToolArgs(argv)).toMatchObject(expected);
  });

  it.each([
    [[], "expected one command"],
    [["show"], "show needs --agent ID"],
    [["show", "--agent", "nope"], "--agent must be an agent id"],
    [["show", "--agent", AGENT, "--operator-key", "k"], "show takes no --operator-key"],
    [["set", "--agent", AGENT], "set needs --file"],
    [["freeze"], "freeze needs --agent ID or --all"],
    [["freeze", "--all", "--agent", AGENT], "not both"],
    [["unfreeze", "--all"], "unfreeze needs --operator-key FILE"],
    [["approve", "--agent", AGENT, "--action", ACTION], "approve needs --operator-key FILE"],
    [["reject", "--agent", AGENT, "--action", "x"], "--action must be an action id"],
    [
      ["reject", "--agent", AGENT, "--action", ACTION, "--operator-key", "k"],
      "reject takes no --operator-key",
    ],
    [["enroll", "--operator-key", "k"], "enroll needs --policy-key"],
    [["enroll", "--operator-key", "k", "--policy-key", "p", "--key-id", "a b"], "--key-id must be"],
    [["show", "--agent", AGENT, "--bogus"], "Unknown option"],
  ])("refuses %j", (argv, message) => {
    expect(() => parsePolicyToolArgs(argv)).toThrow(UsageError);
    expect(() => parsePolicyToolArgs(argv)).toThrow(message);
  });

  it("derives a key id from the public point alone: op- and 16 hex digits, stable", () => {
    const point = `0x04${"11".repeat(64)}` as const;
    expect(operatorKeyId(point)).toMatch(/^op-[0-9a-f]{16}$/);
    expect(operatorKeyId(point)).toBe(operatorKeyId(point));
    expect(operatorKeyId(`0x04${"22".repeat(64)}`)).not.toBe(operatorKeyId(point));
  });
});
