import { describe, expect, it } from "vitest";
import { parseConfig } from "./config.ts";

const secret = (fill: string, bytes = 32): string => fill.repeat(bytes);

function errorsOf(env: Record<string, string>): string[] {
  const result = parseConfig(env);
  if (result.ok) throw new Error("expected the configuration to be refused");
  return result.error;
}

describe("configuration", () => {
  it("defaults every feature switch off, transfer limits to 0 and the x402 validity to 180 s", () => {
    const result = parseConfig({});
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    const config = result.value;
    expect(config.gatewayEnabled).toBe(false);
    expect(config.features).toEqual({
      publicRegistration: false,
      faucet: false,
      transfers: false,
      x402: false,
      liveIdentity: false,
      registrationAllowLoopback: false,
    });
    expect(config.transfers.perTxLimitUnits).toBe(0n);
    expect(config.transfers.dailyLimitUnits).toBe(0n);
    expect(config.x402.maxTimeoutSeconds).toBe(180);
    expect(config.http.basePath).toBe("/77");
  });

  it.each(["TRUE", "True", "1", "yes", " true", ""])("treats AGENT_GATEWAY_ENABLED=%j as off", (value) => {
    // Off, not refused: a value other than `true` is a valid "no".
    expect(parseConfig({ AGENT_GATEWAY_ENABLED: value })).toMatchObject({
      ok: true,
      value: { gatewayEnabled: false },
    });
  });

  it("defaults webhooks to the Standard Webhooks schedule, a 15 s timeout, no private addresses and 1000 pending per endpoint", () => {
    const result = parseConfig({});
    if (!result.ok) throw new Error("refused");
    expect(result.value.webhooks).toEqual({
      retrySeconds: [0, 5, 300, 1_800, 7_200, 18_000, 36_000, 36_000],
      allowPrivate: false,
      signingKeyFile: undefined,
      timeoutMs: 15_000,
      maxPending: 1_000,
    });
    const set = parseConfig({
      AGENT_WEBHOOKS_RETRY_SECONDS: "0, 1,1,2,2",
      AGENT_WEBHOOKS_ALLOW_PRIVATE: "true",
      AGENT_WEBHOOKS_MAX_PENDING: "5",
    });
    if (!set.ok) throw new Error("refused");
    expect(set.value.webhooks).toMatchObject({
      retrySeconds: [0, 1, 1, 2, 2],
      allowPrivate: true,
      maxPending: 5,
    });
  });

  it.each(["0", "100001", "-1", "1.5", "1e3", "many"])("refuses AGENT_WEBHOOKS_MAX_PENDING=%j", (value) => {
    expect(errorsOf({ AGENT_WEBHOOKS_MAX_PENDING: value })[0]).toMatch(/^AGENT_WEBHOOKS_MAX_PENDING: /);
  });

  it.each(["1,,2", "-1", "1.5", "5m", "604801", Array(21).fill("1").join(",")])(
    "refuses AGENT_WEBHOOKS_RETRY_SECONDS=%j",
    (value) => {
      expect(errorsOf({ AGENT_WEBHOOKS_RETRY_SECONDS: value })[0]).toMatch(/^AGENT_WEBHOOKS_RETRY_SECONDS: /);
    },
  );

  it("refuses a webhook schedule that can outlast the event log's retention, and takes one within it", () => {
    // Mutation: without the check, a retention of 1 day with the standard schedule (up to about 33 h
    // with the jitter and hour-long Retry-Afters) is taken, and its last attempts are swept unsent.
    expect(errorsOf({ AGENT_EVENTS_RETENTION_DAYS: "1" })).toEqual([
      expect.stringMatching(
        /^AGENT_WEBHOOKS_RETRY_SECONDS: the schedule can take 117720 s .* AGENT_EVENTS_RETENTION_DAYS=1 \(86400 s\)/,
      ),
    ]);
    expect(parseConfig({ AGENT_EVENTS_RETENTION_DAYS: "2" }).ok).toBe(true);
    expect(
      parseConfig({ AGENT_EVENTS_RETENTION_DAYS: "1", AGENT_WEBHOOKS_RETRY_SECONDS: "0,5,300,1800,7200" }).ok,
    ).toBe(true);
    expect(errorsOf({ AGENT_EVENTS_RETENTION_DAYS: "7", AGENT_WEBHOOKS_RETRY_SECONDS: "604800" })[0]).toMatch(
      /^AGENT_WEBHOOKS_RETRY_SECONDS: the schedule can take 604800 s/,
    );
  });

  it("reads an empty variable as unset", () => {
    const result = parseConfig({ DATABASE_URL: "", AGENT_REGISTRATION_IP_SECRET: "", ORIGIN_PORT: "" });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value.database.url).toBeUndefined();
    expect(result.value.secrets.registrationIp).toBeUndefined();
    expect(result.value.http.port).toBe(8788);
  });

  it("turns the gateway on only for the literal true", () => {
    expect(parseConfig({ AGENT_GATEWAY_ENABLED: "true" })).toMatchObject({
      ok: true,
      value: { gatewayEnabled: true },
    });
  });

  it("refuses a 31-byte secret, naming the variable and never its value", () => {
    const value = secret("k", 31);
    const errors = errorsOf({ AGENT_REGISTRATION_IP_SECRET: value });
    expect(errors).toEqual(["AGENT_REGISTRATION_IP_SECRET: must be at least 32 bytes"]);
    expect(errors.join("\n")).not.toContain(value);
  });

  it("measures secrets in bytes, not characters", () => {
    // 16 two-byte characters: 16 characters, 32 bytes.
    expect(parseConfig({ AGENT_ADMIN_API_TOKEN: "é".repeat(16) }).ok).toBe(true);
    expect(errorsOf({ AGENT_ADMIN_API_TOKEN: "é".repeat(15) })).toHaveLength(1);
  });

  it("refuses two equal secrets with a message naming both", () => {
    const shared = secret("s");
    const errors = errorsOf({
      AGENT_REGISTRATION_IP_SECRET: shared,
      AGENT_REGISTRATION_ADMIN_SECRET: shared,
    });
    expect(errors).toEqual([
      "AGENT_REGISTRATION_ADMIN_SECRET: must differ from AGENT_REGISTRATION_IP_SECRET (the two secrets are equal)",
    ]);
    expect(errors.join("\n")).not.toContain(shared);
  });

  it("lists every bad variable at once", () => {
    const errors = errorsOf({
      AGENT_REGISTRATION_ADMIN_SECRET: "short",
      AGENT_TRANSFER_PER_TX_LIMIT: "1.5",
      AGENT_X402_MAX_TIMEOUT_SECONDS: "0",
      AGENT_TRUSTED_PROXIES: "10.0.0.0/8,not-an-ip",
      AGENT_SIGNER_SVC_HSM_ENDPOINT: "tcp://host:1",
      AGENT_X402_PAY_TO: "0x1234",
    });
    const names = errors.map((line) => line.split(":")[0]);
    expect(names.sort()).toEqual(
      [
        "AGENT_REGISTRATION_ADMIN_SECRET",
        "AGENT_SIGNER_SVC_HSM_ENDPOINT",
        "AGENT_TRANSFER_PER_TX_LIMIT",
        "AGENT_TRUSTED_PROXIES",
        "AGENT_X402_MAX_TIMEOUT_SECONDS",
        "AGENT_X402_PAY_TO",
      ].sort(),
    );
  });

  it("takes an address all lower case or checksummed, and refuses mixed case off its checksum, as the enclave's tools do", () => {
    // The EIP-55 example address, and the same with its first letter's case turned.
    const checksummed = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
    const off = "0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
    expect(
      parseConfig({ AGENT_X402_PAY_TO: checksummed, AGENT_TRANSFER_RECIPIENT_ALLOWLIST: checksummed }),
    ).toMatchObject({
      ok: true,
      value: {
        x402: { payTo: checksummed.toLowerCase() },
        transfers: { recipientAllowlist: [checksummed.toLowerCase()] },
      },
    });
    expect(
      errorsOf({ AGENT_X402_PAY_TO: off, AGENT_TRANSFER_RECIPIENT_ALLOWLIST: `${checksummed},${off}` }),
    ).toEqual([
      "AGENT_TRANSFER_RECIPIENT_ALLOWLIST: must be a comma-separated list of 20-byte hex addresses, each all lower case or checksummed",
      "AGENT_X402_PAY_TO: must be a 20-byte hex address, all lower case or checksummed",
    ]);
  });

  it("refuses a chain timeout that with the enclave's 10 s passes the statement bound with money on, naming both", () => {
    // 20 s and the enclave's 10 s: a batch waiting at another's lock still answers within 30 s.
    expect(parseConfig({ AGENT_TRANSFER_ENABLED: "true", CHAIN_RPC_TIMEOUT_MS: "20000" }).ok).toBe(true);
    for (const money of ["AGENT_FAUCET_ENABLED", "AGENT_TRANSFER_ENABLED"]) {
      expect(errorsOf({ [money]: "true", CHAIN_RPC_TIMEOUT_MS: "25000" })).toEqual([
        "CHAIN_RPC_TIMEOUT_MS: at most 20000 with the faucet, transfers or x402 on: a batch holds a sender's lock through its chain reads and the enclave's signature (10 s), and another batch of that sender waits for it within the database's statement bound (STATEMENT_WAIT_MS, 30 s)",
      ]);
    }
    // The gateway alone takes no lock: its chain calls may wait longer.
    expect(parseConfig({ AGENT_GATEWAY_ENABLED: "true", CHAIN_RPC_TIMEOUT_MS: "25000" }).ok).toBe(true);
  });

  it("refuses a faucet whose daily limit is below its payout, which would pay nothing and answer faucet_daily_limit at every midnight", () => {
    // Was accepted: every request was 429 faucet_daily_limit with a Retry-After to a midnight after
    // which the same payout was refused again.
    const faucet = { AGENT_FAUCET_ENABLED: "true", AGENT_FAUCET_PAYOUT_AMOUNT: "2000000" };
    expect(errorsOf({ ...faucet, AGENT_FAUCET_DAILY_LIMIT: "1999999" })).toEqual([
      "AGENT_FAUCET_DAILY_LIMIT: 1999999 is below AGENT_FAUCET_PAYOUT_AMOUNT (2000000): no payout fits a day, so the faucet would pay nothing and tell every agent to come back at midnight",
    ]);
    // The default daily limit (1 USDC) is below a 2 USDC payout too.
    expect(errorsOf(faucet)).toHaveLength(1);
    expect(parseConfig({ ...faucet, AGENT_FAUCET_DAILY_LIMIT: "2000000" }).ok).toBe(true);
    // With the faucet off the figures answer nothing.
    expect(parseConfig({ AGENT_FAUCET_PAYOUT_AMOUNT: "2000000" }).ok).toBe(true);
  });

  it("bounds a pool transaction's wait for its next statement at 2 min, and refuses a bound under 60 s", () => {
    const defaults = parseConfig({});
    expect(defaults.ok && defaults.value.database.idleInTransactionMs).toBe(120_000);
    const chosen = parseConfig({ DATABASE_IDLE_IN_TRANSACTION_MS: "300000" });
    expect(chosen.ok && chosen.value.database.idleInTransactionMs).toBe(300_000);
    // Under twice the statement bound, a money batch alive through its chain reads and signature
    // could be ended.
    expect(errorsOf({ DATABASE_IDLE_IN_TRANSACTION_MS: "30000" })).toEqual([
      "DATABASE_IDLE_IN_TRANSACTION_MS: must be at least 60000",
    ]);
  });

  it("requires what an enabled feature needs", () => {
    const errors = errorsOf({ AGENT_PUBLIC_REGISTRATION_ENABLED: "true", AGENT_X402_ENABLED: "true" });
    expect(errors).toEqual(
      expect.arrayContaining([
        "AGENT_REGISTRATION_IP_SECRET: required when AGENT_PUBLIC_REGISTRATION_ENABLED=true",
        "AGENT_EDGE_SHARED_SECRET: required when AGENT_PUBLIC_REGISTRATION_ENABLED=true",
        "AGENT_X402_AMOUNT: required when AGENT_X402_ENABLED=true",
        "AGENT_X402_PAY_TO: required when AGENT_X402_ENABLED=true",
      ]),
    );
  });

  it("defaults the x402 margin to 6 s and the per-client window to 1200 a minute, and refuses a margin no payment could meet", () => {
    const x402 = {
      AGENT_X402_ENABLED: "true",
      AGENT_X402_AMOUNT: "10000",
      AGENT_X402_PAY_TO: "0x4020000000000000000000000000000000000402",
    };
    expect(parseConfig(x402)).toMatchObject({
      ok: true,
      value: { x402: { validityMarginSeconds: 6, rateLimitPerMinute: 1200 } },
    });
    expect(parseConfig({ ...x402, AGENT_X402_VALIDITY_MARGIN_SECONDS: "59" }).ok).toBe(true);
    expect(errorsOf({ ...x402, AGENT_X402_VALIDITY_MARGIN_SECONDS: "60" })).toEqual([
      "AGENT_X402_VALIDITY_MARGIN_SECONDS: must be below the demo quote's maxTimeoutSeconds (60)",
    ]);
    // A node signing at most 20 s quotes 20 s.
    const short = { ...x402, AGENT_X402_MAX_TIMEOUT_SECONDS: "20" };
    expect(parseConfig({ ...short, AGENT_X402_VALIDITY_MARGIN_SECONDS: "19" }).ok).toBe(true);
    expect(errorsOf({ ...short, AGENT_X402_VALIDITY_MARGIN_SECONDS: "20" })).toEqual([
      "AGENT_X402_VALIDITY_MARGIN_SECONDS: must be below the demo quote's maxTimeoutSeconds (20)",
    ]);
    // The default margin counts as it is: a node quoting 5 s would refuse every payment with it.
    expect(errorsOf({ ...x402, AGENT_X402_MAX_TIMEOUT_SECONDS: "5" })).toEqual([
      "AGENT_X402_VALIDITY_MARGIN_SECONDS: must be below the demo quote's maxTimeoutSeconds (5), and is unset: its default is 6; set a smaller one or raise AGENT_X402_MAX_TIMEOUT_SECONDS",
    ]);
    expect(parseConfig({ ...x402, AGENT_X402_MAX_TIMEOUT_SECONDS: "7" }).ok).toBe(true);
    expect(errorsOf({ AGENT_X402_RATE_LIMIT_PER_MINUTE: "0" })).toEqual([
      "AGENT_X402_RATE_LIMIT_PER_MINUTE: must be at least 1",
    ]);
  });

  it("sends the origin's own chain batches in parts of 100 calls unless CHAIN_RPC_BATCH_LIMIT says otherwise, 1 to 1000", () => {
    expect(parseConfig({})).toMatchObject({ ok: true, value: { chain: { batchLimit: 100 } } });
    expect(parseConfig({ CHAIN_RPC_BATCH_LIMIT: "10" })).toMatchObject({
      ok: true,
      value: { chain: { batchLimit: 10 } },
    });
    expect(errorsOf({ CHAIN_RPC_BATCH_LIMIT: "0" })).toEqual(["CHAIN_RPC_BATCH_LIMIT: must be at least 1"]);
    expect(errorsOf({ CHAIN_RPC_BATCH_LIMIT: "1001" })).toEqual([
      "CHAIN_RPC_BATCH_LIMIT: must be at most 1000",
    ]);
  });

  it("closes an unread /rpc answer's connection after 30 s unless AGENT_RPC_ANSWER_DEADLINE_MS says otherwise, 1 s to 300 s", () => {
    expect(parseConfig({})).toMatchObject({ ok: true, value: { http: { rpcAnswerDeadlineMs: 30_000 } } });
    expect(parseConfig({ AGENT_RPC_ANSWER_DEADLINE_MS: "20000" })).toMatchObject({
      ok: true,
      value: { http: { rpcAnswerDeadlineMs: 20_000 } },
    });
    expect(errorsOf({ AGENT_RPC_ANSWER_DEADLINE_MS: "999" })).toEqual([
      "AGENT_RPC_ANSWER_DEADLINE_MS: must be at least 1000",
    ]);
    expect(errorsOf({ AGENT_RPC_ANSWER_DEADLINE_MS: "300001" })).toEqual([
      "AGENT_RPC_ANSWER_DEADLINE_MS: must be at most 300000",
    ]);
  });

  it("keeps the x402 receipt wait 10 s inside the official facilitator client's 90 s, refusing over 80000 by name", () => {
    expect(parseConfig({})).toMatchObject({ ok: true, value: { x402: { receiptTimeoutMs: 10_000 } } });
    expect(parseConfig({ AGENT_X402_RECEIPT_TIMEOUT_MS: "80000" })).toMatchObject({
      ok: true,
      value: { x402: { receiptTimeoutMs: 80_000 } },
    });
    const refusal =
      "AGENT_X402_RECEIPT_TIMEOUT_MS: must be at most 80000: the official x402 facilitator client gives up on a settle after 90 s, and a settle takes up to 10 s more than its receipt wait";
    expect(errorsOf({ AGENT_X402_RECEIPT_TIMEOUT_MS: "80001" })).toEqual([refusal]);
    expect(errorsOf({ AGENT_X402_RECEIPT_TIMEOUT_MS: "89999" })).toEqual([refusal]);
    expect(errorsOf({ AGENT_X402_RECEIPT_TIMEOUT_MS: "90000" })).toEqual([refusal]);
    expect(errorsOf({ AGENT_X402_RECEIPT_TIMEOUT_MS: "600000" })).toEqual([refusal]);
    expect(errorsOf({ AGENT_X402_RECEIPT_TIMEOUT_MS: "99" })).toEqual([
      "AGENT_X402_RECEIPT_TIMEOUT_MS: must be at least 100",
    ]);
  });

  it("takes AGENT_REGISTRATION_ALLOW_LOOPBACK only for the literal true and a loopback ORIGIN_HOST", () => {
    for (const host of [undefined, "127.0.0.1", "127.1.2.3", "::1", "localhost"]) {
      const result = parseConfig({
        AGENT_REGISTRATION_ALLOW_LOOPBACK: "true",
        ...(host === undefined ? {} : { ORIGIN_HOST: host }),
      });
      expect(result.ok && result.value.features.registrationAllowLoopback, String(host)).toBe(true);
    }
    for (const host of ["0.0.0.0", "10.0.0.5", "::", "origin.internal"]) {
      const env = {
        AGENT_REGISTRATION_ALLOW_LOOPBACK: "true",
        ORIGIN_HOST: host,
        AGENT_ALLOW_PUBLIC_BIND: "1",
      };
      expect(errorsOf(env), host).toEqual([
        "AGENT_REGISTRATION_ALLOW_LOOPBACK: allowed only when ORIGIN_HOST is a loopback address",
      ]);
    }
    const notLiteral = parseConfig({ AGENT_REGISTRATION_ALLOW_LOOPBACK: "1" });
    expect(notLiteral.ok && notLiteral.value.features.registrationAllowLoopback).toBe(false);
  });

  it("refuses a non-loopback ORIGIN_HOST unless AGENT_TRUSTED_PROXIES is set or AGENT_ALLOW_PUBLIC_BIND=1", () => {
    for (const host of ["0.0.0.0", "10.0.0.5", "::", "origin.internal"]) {
      expect(errorsOf({ ORIGIN_HOST: host }), host).toEqual([
        `ORIGIN_HOST: ${host} is not a loopback address; set AGENT_TRUSTED_PROXIES to the CIDRs of the ` +
          "proxies in front of the origin, or AGENT_ALLOW_PUBLIC_BIND=1 to accept that clients reach it directly",
      ]);
      expect(parseConfig({ ORIGIN_HOST: host, AGENT_TRUSTED_PROXIES: "10.0.0.0/8" }).ok, host).toBe(true);
      expect(parseConfig({ ORIGIN_HOST: host, AGENT_ALLOW_PUBLIC_BIND: "1" }).ok, host).toBe(true);
    }
    // Only the literal 1 acknowledges.
    expect(errorsOf({ ORIGIN_HOST: "0.0.0.0", AGENT_ALLOW_PUBLIC_BIND: "true" })[0]).toMatch(
      /^AGENT_ALLOW_PUBLIC_BIND/,
    );
    for (const host of ["127.0.0.1", "127.9.9.9", "::1", "localhost"]) {
      expect(parseConfig({ ORIGIN_HOST: host }).ok, host).toBe(true);
    }
  });

  it("refuses a URL variable that is not http(s), such as a host:port with no scheme, naming each", () => {
    for (const value of [
      "localhost:8545",
      "ws://127.0.0.1:8545",
      "file:///etc/passwd",
      "javascript:alert(1)",
    ]) {
      expect(
        errorsOf({ CHAIN_RPC_URL: value, AGENT_PUBLIC_BASE_URL: value, CONSOLE_ORIGIN: value }),
        value,
      ).toEqual([
        "AGENT_PUBLIC_BASE_URL: must be an http(s) URL",
        "CONSOLE_ORIGIN: must be an http(s) origin",
        "CHAIN_RPC_URL: must be an http(s) URL",
      ]);
    }
    const config = parseConfig({
      CHAIN_RPC_URL: "http://127.0.0.1:8545",
      AGENT_PUBLIC_BASE_URL: "https://wallet.example.com/77",
      CONSOLE_ORIGIN: "https://console.localhost",
    });
    expect(config.ok && [config.value.chain.rpcUrl, config.value.http.publicBaseUrl]).toEqual([
      "http://127.0.0.1:8545",
      "https://wallet.example.com/77",
    ]);
  });

  it("refuses an AGENT_PUBLIC_BASE_URL with a query or a fragment, which every x402 resource URL would carry in its middle", () => {
    for (const value of [
      "https://wallet.example.com/77?x=1",
      "https://wallet.example.com/77#top",
      "https://wallet.example.com/77?",
    ]) {
      expect(errorsOf({ AGENT_PUBLIC_BASE_URL: value }), value).toEqual([
        "AGENT_PUBLIC_BASE_URL: must have no query or fragment (a resource's own path and query follow it)",
      ]);
    }
    const config = parseConfig({ AGENT_PUBLIC_BASE_URL: "https://wallet.example.com/77/" });
    expect(config.ok && config.value.http.publicBaseUrl).toBe("https://wallet.example.com/77");
  });

  it("refuses an IP address as CONSOLE_RP_ID, as it says, and takes a host name", () => {
    for (const value of ["127.0.0.1", "10.0.0.5", "0.0.0.0"]) {
      expect(errorsOf({ CONSOLE_RP_ID: value }), value).toEqual([
        "CONSOLE_RP_ID: must be a host name (lowercase), never an IP address",
      ]);
    }
    const config = parseConfig({ CONSOLE_RP_ID: "console.example.com" });
    expect(config.ok && config.value.console).toEqual({
      rpId: "console.example.com",
      origin: "http://console.example.com:8788",
      allowedHosts: ["console.example.com"],
    });
  });

  it("binds passkeys to CONSOLE_ORIGIN's host when no CONSOLE_RP_ID is set: a console behind a proxy, at its own name, on a loopback listener", () => {
    const behindProxy = parseConfig({ CONSOLE_ORIGIN: "https://console.example.com" });
    expect(behindProxy.ok && behindProxy.value.console).toEqual({
      rpId: "console.example.com",
      origin: "https://console.example.com",
      allowedHosts: ["console.example.com"],
    });
    // A suffix set on purpose, or the listener's name that is one, stays: passkeys enrolled on it
    // go on working. An origin at an IP address can bind no passkey, as before.
    const suffix = parseConfig({
      CONSOLE_ORIGIN: "https://console.example.com",
      CONSOLE_RP_ID: "example.com",
    });
    expect(suffix.ok && suffix.value.console.rpId).toBe("example.com");
    const listener = parseConfig({
      CONSOLE_ORIGIN: "https://console.example.com",
      ORIGIN_HOST: "example.com",
      AGENT_ALLOW_PUBLIC_BIND: "1",
    });
    expect(listener.ok && listener.value.console.rpId).toBe("example.com");
    const underLocalhost = parseConfig({ CONSOLE_ORIGIN: "http://console.localhost:8788" });
    expect(underLocalhost.ok && underLocalhost.value.console.rpId).toBe("localhost");
    const atAddress = parseConfig({ CONSOLE_ORIGIN: "http://10.0.0.5:8788" });
    expect(atAddress.ok && atAddress.value.console.rpId).toBe("localhost");
  });

  it("derives the console's origin as a browser names it, which the passkeys' ceremonies compare: no port at http's own (80), the port at any other", () => {
    const atEighty = parseConfig({ ORIGIN_PORT: "80" });
    expect(atEighty.ok && atEighty.value.console.origin).toBe("http://localhost");
    expect(new URL("http://localhost:80/77/admin/agents").origin).toBe("http://localhost");
    const atItsDefault = parseConfig({});
    expect(atItsDefault.ok && atItsDefault.value.console.origin).toBe("http://localhost:8788");
  });

  it("takes CONSOLE_ALLOWED_HOSTS as host names beside CONSOLE_ORIGIN's, and refuses one with a port", () => {
    const config = parseConfig({
      CONSOLE_ORIGIN: "https://console.example.com",
      CONSOLE_ALLOWED_HOSTS: " Prometheus.Internal ,origin-1.svc,,console.example.com",
    });
    expect(config.ok && config.value.console.allowedHosts).toEqual([
      "console.example.com",
      "prometheus.internal",
      "origin-1.svc",
    ]);
    expect(errorsOf({ CONSOLE_ALLOWED_HOSTS: "origin-1.svc:8788" })).toEqual([
      "CONSOLE_ALLOWED_HOSTS: must be host names without port, comma-separated",
    ]);
  });

  it("parses money as bigint units and trusted proxies as CIDRs of both families", () => {
    const result = parseConfig({
      AGENT_TRANSFER_PER_TX_LIMIT: "123456789012345678901234567890",
      AGENT_TRUSTED_PROXIES: "10.0.0.0/8, 2001:db8::/32, 192.0.2.7",
    });
    expect(result.ok).toBe(true);
    if (!result.ok) return;
    expect(result.value.transfers.perTxLimitUnits).toBe(123456789012345678901234567890n);
    const proxies = result.value.trustedProxies;
    expect(proxies.contains("10.1.2.3")).toBe(true);
    expect(proxies.contains("2001:db8::1")).toBe(true);
    expect(proxies.contains("192.0.2.7")).toBe(true);
    expect(proxies.contains("192.0.2.8")).toBe(false);
    expect(proxies.contains("11.0.0.1")).toBe(false);
  });
});
