/**
 * Agents that only occupy the database, for benchmarks that must not run against near-empty
 * tables (bench:money's growing run): `count` identities, each with its token and an assigned key
 * of one available batch, written by one set-based statement. Their keys are not in any enclave and
 * their tokens' secrets are not known to anyone, so they never sign or authenticate; they are
 * marked verified now, so the identity sweep leaves them alone for its window. They are dated
 * just after the oldest real identity, and their keys put in its batch, so the origin's checks
 * that the enclave holds the assigned keys still ask about real ones: /healthz's (the oldest and
 * the newest identity's, signer/key-holding.ts) and the start's (each batch's oldest identity's,
 * signer/batch-holding.ts). Seed once the real agents are made.
 */
import { sql } from "drizzle-orm";
import { type Db, queryRows } from "../origin/db/client.ts";

export async function seedIdleAgents(db: Db, count: number): Promise<number> {
  // Key refs, addresses and token ids are hashes of the row's number and a random salt: unique,
  // and in each column's format (64 and 40 lowercase hex digits, 32 for a token id).
  const salt = crypto.randomUUID();
  const [row] = await queryRows<{ seeded: number }>(
    db,
    sql`with batch as (
          select p.batch_id from agent_identities i join key_pool p on p.key_ref = i.agent_transfer_key_ref
          order by i.created_at limit 1
        ), keys as (
          select n,
            encode(sha256(convert_to(${salt} || ':key:' || n, 'UTF8')), 'hex') as key_ref,
            '0x' || substr(encode(sha256(convert_to(${salt} || ':address:' || n, 'UTF8')), 'hex'), 1, 40) as address
          from generate_series(1, ${count}) as n
        ), dated as (
          select min(created_at) + interval '1 millisecond' as at from agent_identities
        ), identity as (
          insert into agent_identities (assigned_wallet, agent_transfer_key_ref, capabilities, origin, last_verified_at, created_at)
          select address, key_ref, array['read','faucet','transfer'], 'operator', now(), coalesce(dated.at, now())
          from keys cross join dated order by n
          returning agent_id, assigned_wallet, agent_transfer_key_ref
        ), pool as (
          insert into key_pool (key_ref, batch_id, address, public_key, status, assigned_agent_id, assigned_at)
          select identity.agent_transfer_key_ref, batch.batch_id, identity.assigned_wallet,
            '0x04' || repeat('00', 64), 'assigned', identity.agent_id, now()
          from identity cross join batch
        ), token as (
          insert into agent_tokens (token_id, agent_id, secret_hash)
          select substr(encode(sha256(convert_to(${salt} || ':token:' || agent_id::text, 'UTF8')), 'hex'), 1, 32),
            agent_id, sha256(convert_to(${salt} || ':secret:' || agent_id::text, 'UTF8'))
          from identity
        )
        select count(*)::int as seeded from identity`,
  );
  return row!.seeded;
}
