-- exists.sql: Migrate's test for the Client's table, which reads no row
-- and fails with error 1146 if the table is missing. It needs only the
-- SELECT privilege, where CREATE TABLE IF NOT EXISTS needs CREATE even
-- when the table exists. {{table}} is the quoted table name.
SELECT 1 FROM {{table}} LIMIT 0
