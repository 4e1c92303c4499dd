import { describe, expect, it } from "vitest";
import { DEFAULT_DATA_DIR, DEFAULT_SOCKET_PATH, parseEnclaveArgs, UsageError } from "./cli-args.ts";

describe("enclave CLI arguments", () => {
  it("serves on its defaults when given no flag and no variable", () => {
    expect(parseEnclaveArgs([], {})).toEqual({
      command: "serve",
      dataDir: DEFAULT_DATA_DIR,
      socketPath: DEFAULT_SOCKET_PATH,
      announcedProfile: undefined,
      logLevel: "info",
      socketMode: 0o600,
      verifyStateJournal: false,
      throwaway: false,
    });
    expect(parseEnclaveArgs([], { ENCLAVE_VERIFY_STATE_JOURNAL: "1" })).toMatchObject({
      verifyStateJournal: true,
    });
  });

  it("takes a socket mode of 0600 or 0660 only (flag, then ENCLAVE_SOCKET_MODE)", () => {
    expect(parseEnclaveArgs(["--socket-mode", "0660"], {})).toMatchObject({ socketMode: 0o660 });
    expect(parseEnclaveArgs([], { ENCLAVE_SOCKET_MODE: "0660" })).toMatchObject({ socketMode: 0o660 });
    expect(() => parseEnclaveArgs(["--socket-mode", "0666"], {})).toThrow(UsageError);
    expect(() => parseEnclaveArgs([], { ENCLAVE_SOCKET_MODE: "0777" })).toThrow(UsageError);
  });

  it("takes flags over environment variables", () => {
    const env = { ENCLAVE_SOCKET_PATH: "/env.sock", ENCLAVE_DATA_DIR: "/env-data" };
    expect(parseEnclaveArgs([], env)).toMatchObject({ socketPath: "/env.sock", dataDir: "/env-data" });
    expect(parseEnclaveArgs(["serve", "--socket", "/flag.sock", "--profile", "x"], env)).toMatchObject({
      socketPath: "/flag.sock",
      dataDir: "/env-data",
      announcedProfile: "x",
    });
  });

  it("serves --throwaway only with a --data-dir of its command line, the folder it deletes when it stops", () => {
    expect(parseEnclaveArgs(["--throwaway", "--data-dir", "/tmp/drill"], {})).toMatchObject({
      command: "serve",
      dataDir: "/tmp/drill",
      throwaway: true,
    });
    expect(() => parseEnclaveArgs(["--throwaway"], {})).toThrow(/--throwaway serves with --data-dir/);
    expect(() => parseEnclaveArgs(["--throwaway"], { ENCLAVE_DATA_DIR: "/live" })).toThrow(UsageError);
    expect(() => parseEnclaveArgs(["init", "--throwaway", "--data-dir", "/d"], {})).toThrow(UsageError);
  });

  it("parses init and requires its five values", () => {
    const init = ["init", "--env-id", "dev", "--admin-pubkey", "aa", "--policy-pubkey", "cc"];
    expect(
      parseEnclaveArgs(
        [...init, "--recovery-pubkey", "bb", "--recovery-enc-pubkey", "dd", "--data-dir", "/d"],
        {},
      ),
    ).toEqual({
      command: "init",
      dataDir: "/d",
      envId: "dev",
      adminAuthority: "aa",
      policyAuthority: "cc",
      recoveryAuthority: "bb",
      recoveryEncryptionKey: "dd",
    });
    expect(() => parseEnclaveArgs([...init, "--recovery-pubkey", "bb"], {})).toThrow(/--recovery-enc-pubkey/);
    expect(() => parseEnclaveArgs(["init", "--env-id", "dev"], {})).toThrow(UsageError);
    expect(() =>
      parseEnclaveArgs(["init", "--env-id", "dev", "--admin-pubkey", "aa", "--recovery-pubkey", "bb"], {}),
    ).toThrow(/--policy-pubkey/);
    expect(() => parseEnclaveArgs(["destroy"], {})).toThrow(UsageError);
  });
});
