/**
 * A migrations folder as it was before one migration, for tests of what a migration does to the
 * rows an older schema holds: the same files, the journal cut before `tag`.
 */
import { cp, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { MIGRATIONS_FOLDER } from "../origin/db/migrate.ts";

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
