/**
 * A database copied into another cluster row by row, as pg_dump and pg_restore copy one (the
 * rows and each sequence's place; the schema is the target's own, migrated alike): for the test of
 * a database restored from a logical dump or moved to another server. The target's own rows go
 * first; triggers and foreign keys are off while the rows go in, as pg_restore loads its data.
 */
import pg from "pg";

export async function copyDatabaseRows(fromUrl: string, toUrl: string): Promise<void> {
  const from = new pg.Client({ connectionString: fromUrl });
  const to = new pg.Client({ connectionString: toUrl });
  await from.connect();
  await to.connect();
  try {
    const tables = (
      await from.query<{ name: string }>(
        `select quote_ident(tablename) as name from pg_tables where schemaname = 'public' order by tablename`,
      )
    ).rows.map((row) => row.name);
    await to.query("begin");
    await to.query("set local session_replication_role = replica");
    await to.query(`truncate ${tables.join(", ")}`);
    for (const table of tables) {
      const { rows } = await from.query<{ rows: unknown[] }>(
        `select coalesce(json_agg(t), '[]'::json) as rows from ${table} t`,
      );
      await to.query(
        `insert into ${table} overriding system value select * from json_populate_recordset(null::${table}, $1)`,
        [JSON.stringify(rows[0]!.rows)],
      );
    }
    const sequences = await from.query<{ name: string; last_value: string; is_called: boolean }>(
      `select quote_ident(sequencename) as name, last_value::text, last_value is not null as is_called
       from pg_sequences where schemaname = 'public'`,
    );
    for (const sequence of sequences.rows) {
      if (sequence.is_called)
        await to.query(`select setval('${sequence.name}', $1::bigint, true)`, [sequence.last_value]);
    }
    await to.query("commit");
  } finally {
    await from.end();
    await to.end();
  }
}
