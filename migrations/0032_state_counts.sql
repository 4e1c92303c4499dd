CREATE TABLE "state_count_changes" (
	"family" text NOT NULL,
	"a" text NOT NULL,
	"b" text DEFAULT '' NOT NULL,
	"n" bigint NOT NULL,
	"keys" bigint DEFAULT 0 NOT NULL
);
--> statement-breakpoint
CREATE TABLE "state_counts" (
	"family" text NOT NULL,
	"a" text NOT NULL,
	"b" text DEFAULT '' NOT NULL,
	"n" bigint NOT NULL,
	"keys" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "state_counts_family_a_b_pk" PRIMARY KEY("family","a","b")
);
--> statement-breakpoint
-- The counts by state of the console's operations view and the /metrics gauges
-- (origin/metrics/state-counts.ts), kept as the tables change instead of counted over every row
-- on each read. Each counted table has three statement triggers: an insert adds its rows' states,
-- a delete takes them away, an update does both (transition tables cannot be combined with UPDATE
-- OF status, so an update that changes no state nets to nothing and appends nothing). A truncate
-- empties the table's counts. Changes are appended, never updated in place, so writers never wait
-- on one another for a count; the fold (foldStateCounts) moves them into state_counts.
CREATE FUNCTION "state_counts_key_pool"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM state_counts WHERE family = 'keys';
    DELETE FROM state_count_changes WHERE family = 'keys';
  ELSIF TG_OP = 'INSERT' THEN
    INSERT INTO state_count_changes (family, a, n)
    SELECT 'keys', status, count(*) FROM new_rows GROUP BY status;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO state_count_changes (family, a, n)
    SELECT 'keys', status, -count(*) FROM old_rows GROUP BY status;
  ELSE
    INSERT INTO state_count_changes (family, a, n)
    SELECT 'keys', status, sum(d) FROM (
      SELECT status, 1 AS d FROM new_rows UNION ALL SELECT status, -1 FROM old_rows) c
    GROUP BY status HAVING sum(d) <> 0;
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE FUNCTION "state_counts_key_batches"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM state_counts WHERE family = 'batches';
    DELETE FROM state_count_changes WHERE family = 'batches';
  ELSIF TG_OP = 'INSERT' THEN
    INSERT INTO state_count_changes (family, a, n, keys)
    SELECT 'batches', status, count(*), sum(size) FROM new_rows GROUP BY status;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO state_count_changes (family, a, n, keys)
    SELECT 'batches', status, -count(*), -sum(size) FROM old_rows GROUP BY status;
  ELSE
    INSERT INTO state_count_changes (family, a, n, keys)
    SELECT 'batches', status, sum(d), sum(d * size) FROM (
      SELECT status, size, 1 AS d FROM new_rows UNION ALL SELECT status, size, -1 FROM old_rows) c
    GROUP BY status HAVING sum(d) <> 0 OR sum(d * size) <> 0;
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE FUNCTION "state_counts_agent_actions"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM state_counts WHERE family = 'actions';
    DELETE FROM state_count_changes WHERE family = 'actions';
  ELSIF TG_OP = 'INSERT' THEN
    INSERT INTO state_count_changes (family, a, b, n)
    SELECT 'actions', kind, status, count(*) FROM new_rows GROUP BY kind, status;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO state_count_changes (family, a, b, n)
    SELECT 'actions', kind, status, -count(*) FROM old_rows GROUP BY kind, status;
  ELSE
    INSERT INTO state_count_changes (family, a, b, n)
    SELECT 'actions', kind, status, sum(d) FROM (
      SELECT kind, status, 1 AS d FROM new_rows UNION ALL SELECT kind, status, -1 FROM old_rows) c
    GROUP BY kind, status HAVING sum(d) <> 0;
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE FUNCTION "state_counts_x402_settlements"() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    DELETE FROM state_counts WHERE family = 'settlements';
    DELETE FROM state_count_changes WHERE family = 'settlements';
  ELSIF TG_OP = 'INSERT' THEN
    INSERT INTO state_count_changes (family, a, n)
    SELECT 'settlements', status, count(*) FROM new_rows GROUP BY status;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO state_count_changes (family, a, n)
    SELECT 'settlements', status, -count(*) FROM old_rows GROUP BY status;
  ELSE
    INSERT INTO state_count_changes (family, a, n)
    SELECT 'settlements', status, sum(d) FROM (
      SELECT status, 1 AS d FROM new_rows UNION ALL SELECT status, -1 FROM old_rows) c
    GROUP BY status HAVING sum(d) <> 0;
  END IF;
  RETURN NULL;
END
$$;--> statement-breakpoint
CREATE TRIGGER "key_pool_state_counts_insert" AFTER INSERT ON "key_pool"
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION state_counts_key_pool();--> statement-breakpoint
CREATE TRIGGER "key_pool_state_counts_update" AFTER UPDATE ON "key_pool"
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION state_counts_key_pool();--> statement-breakpoint
CREATE TRIGGER "key_pool_state_counts_delete" AFTER DELETE ON "key_pool"
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION state_counts_key_pool();--> statement-breakpoint
CREATE TRIGGER "key_pool_state_counts_truncate" AFTER TRUNCATE ON "key_pool"
FOR EACH STATEMENT EXECUTE FUNCTION state_counts_key_pool();--> statement-breakpoint
CREATE TRIGGER "key_batches_state_counts_insert" AFTER INSERT ON "key_batches"
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION state_counts_key_batches();--> statement-breakpoint
CREATE TRIGGER "key_batches_state_counts_update" AFTER UPDATE ON "key_batches"
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION state_counts_key_batches();--> statement-breakpoint
CREATE TRIGGER "key_batches_state_counts_delete" AFTER DELETE ON "key_batches"
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION state_counts_key_batches();--> statement-breakpoint
CREATE TRIGGER "key_batches_state_counts_truncate" AFTER TRUNCATE ON "key_batches"
FOR EACH STATEMENT EXECUTE FUNCTION state_counts_key_batches();--> statement-breakpoint
CREATE TRIGGER "agent_actions_state_counts_insert" AFTER INSERT ON "agent_actions"
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION state_counts_agent_actions();--> statement-breakpoint
CREATE TRIGGER "agent_actions_state_counts_update" AFTER UPDATE ON "agent_actions"
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION state_counts_agent_actions();--> statement-breakpoint
CREATE TRIGGER "agent_actions_state_counts_delete" AFTER DELETE ON "agent_actions"
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION state_counts_agent_actions();--> statement-breakpoint
CREATE TRIGGER "agent_actions_state_counts_truncate" AFTER TRUNCATE ON "agent_actions"
FOR EACH STATEMENT EXECUTE FUNCTION state_counts_agent_actions();--> statement-breakpoint
CREATE TRIGGER "x402_settlements_state_counts_insert" AFTER INSERT ON "x402_settlements"
REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION state_counts_x402_settlements();--> statement-breakpoint
CREATE TRIGGER "x402_settlements_state_counts_update" AFTER UPDATE ON "x402_settlements"
REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION state_counts_x402_settlements();--> statement-breakpoint
CREATE TRIGGER "x402_settlements_state_counts_delete" AFTER DELETE ON "x402_settlements"
REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION state_counts_x402_settlements();--> statement-breakpoint
CREATE TRIGGER "x402_settlements_state_counts_truncate" AFTER TRUNCATE ON "x402_settlements"
FOR EACH STATEMENT EXECUTE FUNCTION state_counts_x402_settlements();--> statement-breakpoint
-- The counts as they stand. Each CREATE TRIGGER above waited for the table's writers in progress
-- and keeps new ones out until the migration commits: no row is both counted here and appended as
-- a change, and none is missed.
INSERT INTO "state_counts" (family, a, b, n, keys)
SELECT 'keys', status, '', count(*), 0 FROM key_pool GROUP BY status
UNION ALL SELECT 'batches', status, '', count(*), sum(size) FROM key_batches GROUP BY status
UNION ALL SELECT 'actions', kind, status, count(*), 0 FROM agent_actions GROUP BY kind, status
UNION ALL SELECT 'settlements', status, '', count(*), 0 FROM x402_settlements GROUP BY status;
