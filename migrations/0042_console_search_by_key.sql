-- The console's search by an idempotency key, whatever the agent, read the whole of agent_actions:
-- the unique key (agent_id, kind, idempotency_key) leads with the agent
-- (origin/console/browse-pages-plan.int.test.ts).
CREATE INDEX "agent_actions_idempotency_key_idx" ON "agent_actions" USING btree ("idempotency_key");