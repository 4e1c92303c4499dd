/**
 * A migrations folder as it was before one migration, for tests of what a migration does to the
 * rows an older schema holds: the same files, the journal cut before `tag`.
 */
import { randomBytes } from "node:crypto";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, inject } from "vitest";
import { connectDatabase, type DatabaseHandle } from "../origin/db/client.ts";
import { MIGRATIONS_FOLDER } from "../origin/db/migrate.ts";
import { adminQuery, withDatabase } from "./global-setup.ts";

/** The folder's path; the caller removes it. Throws when `tag` is not a later migration. */
export async function migrationsBefore(tag: string): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), "migrations-"));
  await cp(MIGRATIONS_FOLDER, dir, { recursive: true });
  const journalPath = path.join(dir, "meta", "_journal.json");
  const journal = JSON.parse(await readFile(journalPath, "utf8")) as { entries: { tag: string }[] };
  const cut = journal.entries.findIndex((entry) => entry.tag === tag);
  if (cut <= 0) throw new Error(`no migration ${tag} after the first`);
  journal.entries = journal.entries.slice(0, cut);
  await writeFile(journalPath, JSON.stringify(journal));
  return dir;
}

/**
 * For the describe block it is called in: `count` empty databases on the run's Postgres and the
 * migrations folder as it was before `tag` (`migrationsBefore()`), made in beforeAll and gone after the block.
 * A test migrates a database to `migrationsBefore()`, writes the rows an older schema held, then migrates it
 * the rest of the way.
 */
export function useDatabasesBefore(
  tag: string,
  count = 1,
): { databases: DatabaseHandle[]; migrationsBefore(): string } {
  const adminUrl = inject("pgAdminUrl");
  const names = Array.from({ length: count }, () => `agents_migration_${randomBytes(6).toString("hex")}`);
  const databases: DatabaseHandle[] = [];
  let folder: string | undefined;
  beforeAll(async () => {
    for (const name of names) {
      await adminQuery(adminUrl, `create database "${name}"`);
      databases.push(connectDatabase({ url: withDatabase(adminUrl, name), driver: "pg" }));
    }
    folder = await migrationsBefore(tag);
  });
  afterAll(async () => {
    for (const database of databases) await database.close();
    for (const name of names) await adminQuery(adminUrl, `drop database if exists "${name}" with (force)`);
    if (folder) await rm(folder, { recursive: true, force: true });
  });
  return {
    databases,
    migrationsBefore() {
      if (!folder) throw new Error(`the migrations before ${tag} are read before beforeAll made them`);
      return folder;
    },
  };
}
