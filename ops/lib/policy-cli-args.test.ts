import { describe, expect, it } from "vitest";
import { DEFAULT_POLICY_SOCKET, PolicyUsageError, parsePolicyArgs } from "./policy-cli-args.ts";

const KEY = ["--policy-key", "/keys/policy.key"];

describe("enclave-policy arguments", () => {
  it("reads the socket from --socket, then AGENT_SIGNER_SVC_HSM_ENDPOINT, then the local stack's", () => {
    expect(parsePolicyArgs(["show", "--socket", "/s.sock"], {})).toEqual({
      command: "show",
      socketPath: "/s.sock",
      json: false,
    });
    expect(parsePolicyArgs(["show"], { AGENT_SIGNER_SVC_HSM_ENDPOINT: "unix:///e.sock" })).toMatchObject({
      socketPath: "/e.sock",
    });
    expect(parsePolicyArgs(["show", "--json"], {})).toMatchObject({
      socketPath: DEFAULT_POLICY_SOCKET,
      json: true,
    });
  });

  it("parses apply's flags into bigint amounts and lowercase addresses, leaving out what is not named", () => {
    const parsed = parsePolicyArgs(
      [
        "apply",
        ...KEY,
        "--per-tx",
        "10000000",
        "--fee-ceiling",
        "1000000000000000000000",
        "--allowlist",
        "0x54A305F4ad9E69d59Fd3e76646FFa7b8993fFE7B, 0x1111111111111111111111111111111111111111",
        "--x402-amount",
        "none",
        "--max-validity",
        "180",
        "--x402-margin",
        "0",
        "--x402-daily",
        "1000",
        "--settler-daily",
        "20000000",
      ],
      {},
    );
    expect(parsed).toEqual({
      command: "apply",
      socketPath: DEFAULT_POLICY_SOCKET,
      json: false,
      policyKeyFile: "/keys/policy.key",
      changes: {
        perTxLimitUnits: 10_000_000n,
        feeCeilingWei: 10n ** 21n,
        recipientAllowlist: [
          "0x54a305f4ad9e69d59fd3e76646ffa7b8993ffe7b",
          "0x1111111111111111111111111111111111111111",
        ],
        x402AmountUnits: null,
        x402MaxTimeoutSeconds: 180,
        x402ValidityMarginSeconds: 0,
        x402DailyLimit: 1000,
        settlerDailyFeeUnits: 20_000_000n,
      },
    });
    expect(parsePolicyArgs(["apply", ...KEY, "--allowlist", "none"], {})).toMatchObject({
      changes: { recipientAllowlist: null },
    });
  });

  it("parses treasury and its payout terms, leaving out the terms it does not name", () => {
    expect(
      parsePolicyArgs(
        [
          "treasury",
          ...KEY,
          "--budget",
          "1000",
          "--faucet-key-ref",
          "ab".repeat(32),
          "--payout",
          "1000000",
          "--cooldown-ms",
          "60000",
          "--payout-daily",
          "10000000",
        ],
        {},
      ),
    ).toEqual({
      command: "treasury",
      socketPath: DEFAULT_POLICY_SOCKET,
      json: false,
      policyKeyFile: "/keys/policy.key",
      budgetUnits: 1000n,
      faucetKeyRef: "ab".repeat(32),
      terms: { payoutUnits: 1_000_000n, cooldownMs: 60_000, dailyLimitUnits: 10_000_000n },
    });
    expect(parsePolicyArgs(["treasury", ...KEY, "--budget", "1000", "--cooldown-ms", "0"], {})).toMatchObject(
      {
        faucetKeyRef: undefined,
        terms: { cooldownMs: 0 },
      },
    );
  });

  it("parses settler, with or without the key to point it at", () => {
    expect(parsePolicyArgs(["settler", ...KEY, "--settler-key-ref", "cd".repeat(32)], {})).toEqual({
      command: "settler",
      socketPath: DEFAULT_POLICY_SOCKET,
      json: false,
      policyKeyFile: "/keys/policy.key",
      settlerKeyRef: "cd".repeat(32),
    });
    expect(parsePolicyArgs(["settler", ...KEY], {})).toMatchObject({ settlerKeyRef: undefined });
  });

  it("refuses what it cannot apply exactly", () => {
    const bad = [
      [],
      ["drain"],
      ["show", "apply"],
      ["show", "--bogus"],
      ["show", ...KEY],
      ["apply", "--per-tx", "5"],
      ["apply", ...KEY],
      ["apply", ...KEY, "--per-tx", "1.5"],
      ["apply", ...KEY, "--per-tx", "-1"],
      ["apply", ...KEY, "--daily", "1e6"],
      ["apply", ...KEY, "--fee-ceiling", "007"],
      ["apply", ...KEY, "--allowlist", "0x12"],
      ["apply", ...KEY, "--allowlist", "0x54A305F4ad9E69d59Fd3e76646FFa7b8993fFE7b"], // bad checksum
      ["apply", ...KEY, "--operator-pool", "pool"],
      ["apply", ...KEY, "--max-validity", "0"],
      ["apply", ...KEY, "--max-validity", "86401"],
      ["apply", ...KEY, "--budget", "5"],
      ["treasury", ...KEY],
      ["treasury", ...KEY, "--budget", "5", "--per-tx", "5"],
      ["treasury", ...KEY, "--budget", "5", "--faucet-key-ref", "xyz"],
      ["treasury", ...KEY, "--budget", "5", "--payout", "1.5"],
      ["treasury", ...KEY, "--budget", "5", "--cooldown-ms", "-1"],
      ["treasury", ...KEY, "--budget", "5", "--cooldown-ms", "31536000001"],
      ["treasury", ...KEY, "--budget", "5", "--payout-daily", "1e6"],
      ["treasury", ...KEY, "--budget", "5", "--x402-daily", "5"],
      ["apply", ...KEY, "--x402-margin", "601"],
      ["apply", ...KEY, "--x402-margin", "6.5"],
      ["apply", ...KEY, "--x402-daily", "-1"],
      ["apply", ...KEY, "--settler-daily", "1.5"],
      ["treasury", ...KEY, "--budget", "5", "--settler-daily", "5"],
      ["apply", ...KEY, "--payout", "5"],
      ["settler", ...KEY, "--settler-key-ref", "xyz"],
      ["settler", ...KEY, "--payout", "5"],
      ["show", "--settler-key-ref", "cd".repeat(32)],
    ];
    for (const argv of bad) expect(() => parsePolicyArgs(argv, {}), argv.join(" ")).toThrow(PolicyUsageError);
    // enroll-passkey and revoke-passkey are taken before this parser (ops/enclave-policy.ts), and
    // named with the others.
    expect(() => parsePolicyArgs(["frobnicate"], {})).toThrow(
      "expected one command: show, apply, treasury, settler, payee, enroll-passkey, revoke-passkey or revoke-operator-key",
    );
    expect(() => parsePolicyArgs(["show"], { AGENT_SIGNER_SVC_HSM_ENDPOINT: "tcp://x" })).toThrow(
      PolicyUsageError,
    );
  });
});
