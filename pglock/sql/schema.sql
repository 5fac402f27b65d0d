-- schema.sql: the objects of one pglock table. Client.Migrate runs it, in
-- a transaction, under an advisory lock; SchemaSQL returns it for those
-- who run their migrations themselves. Every statement is idempotent.
-- {{table}}, {{sequence}} and {{fences}} are quoted identifiers.

-- One row per lock name, for both modes. A release frees the row
-- (token '', expires_at -infinity) rather than deleting it.
CREATE TABLE IF NOT EXISTS {{table}} (
    name       text        PRIMARY KEY,
    token      text        NOT NULL, -- the holder's owner token; '' when free
    fence      bigint      NOT NULL, -- the fence of the latest grant
    expires_at timestamptz NOT NULL  -- on the database's clock
);

-- The record of an election's leader (Client.NewElection): its term, token
-- and value, valid while the token holds the row. Added after the table's
-- first version: Migrate again to use elections. Only when it is missing:
-- ALTER TABLE locks the table against every lock call, even to do nothing.
DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_attribute
                   WHERE attrelid = '{{table}}'::regclass AND attname = 'leader' AND NOT attisdropped) THEN
        ALTER TABLE {{table}} ADD COLUMN leader text;
    END IF;
END
$$;

-- A grant's fence is at least the next value of this sequence, the
-- row's last fence plus one and the database's clock in microseconds
-- (acquire.sql).
CREATE SEQUENCE IF NOT EXISTS {{sequence}} AS bigint;

-- Move the sequence up to the database's clock in microseconds. Fences
-- do not depend on it: each grant lifts its fence to the clock itself.
SELECT setval(s.tableoid, c.us)
FROM {{sequence}} s,
     (SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint AS us) c
WHERE s.last_value < c.us - 1000000;

-- WriteFenced: the newest fence written to each resource.
CREATE TABLE IF NOT EXISTS {{fences}} (
    resource text   PRIMARY KEY,
    fence    bigint NOT NULL
);
