import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import type { Db } from "../origin/db/client.ts";
import { loadOrCreateLocalAgent } from "./local-agent.ts";
import { writeLocalJson } from "./local-files.ts";
import { loadOrCreateLocalSecrets } from "./local-secrets.ts";

// The local stack's own files under its data folder. One cut short (a kill or a full disk in the
// middle of its write, before these were written through a renamed file) ended every later start
// with JSON.parse's "Unexpected end of JSON input", naming no file.

describe("the local stack's secrets and agent files", () => {
  const folders: string[] = [];
  const folder = async (): Promise<string> => {
    const made = await mkdtemp(path.join(tmpdir(), "agents-local-files-"));
    folders.push(made);
    return made;
  };
  afterAll(async () => {
    for (const made of folders) await rm(made, { recursive: true, force: true });
  });

  it("a local-secrets.json cut short ends the start naming the file and what to do", async () => {
    const dataDir = await folder();
    await writeFile(path.join(dataDir, "local-secrets.json"), '{\n  "registrationIpSecret": "ab');
    await expect(loadOrCreateLocalSecrets(dataDir)).rejects.toThrow(
      new RegExp(
        `^${path.join(dataDir, "local-secrets.json")} does not hold valid JSON \\(.*\\): delete it to make new secrets`,
      ),
    );
  });

  it("a local-agent.json cut short ends the start naming the file and what to do, before the database is asked", async () => {
    const dataDir = await folder();
    await writeFile(path.join(dataDir, "local-agent.json"), '{\n  "token": "agt_');
    // Never used: the file is read before any query (a database would only be asked after it).
    const db = {} as Db;
    await expect(loadOrCreateLocalAgent({ db, dataDir, devnetUrl: "http://127.0.0.1:9" })).rejects.toThrow(
      `${path.join(dataDir, "local-agent.json")} does not hold valid JSON`,
    );
  });

  it("writes a file whole through a renamed one: 0600, its JSON, nothing left beside it", async () => {
    const dataDir = await folder();
    const file = path.join(dataDir, "local-secrets.json");
    await writeFile(file, "old", { mode: 0o600 });
    await writeLocalJson(file, { adminApiToken: "ab".repeat(32) });
    expect(JSON.parse(await readFile(file, "utf8"))).toEqual({ adminApiToken: "ab".repeat(32) });
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await readdir(dataDir)).toEqual(["local-secrets.json"]);
    const secrets = await loadOrCreateLocalSecrets(await folder());
    expect(Object.values(secrets).every((value) => /^[0-9a-f]{64}$/.test(value))).toBe(true);
  });
});
