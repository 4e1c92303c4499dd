-- SPEC "Registration policy and counters": the initial database policy is paused.
INSERT INTO "registration_policy" ("id") VALUES (1) ON CONFLICT ("id") DO NOTHING;
