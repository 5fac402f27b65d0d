-- schema.sql: the table of one mysqllock Client. Client.Migrate runs it;
-- SchemaSQL returns it for those who run their migrations themselves. It
-- is idempotent. {{table}} is the quoted table name.
--
-- One row per lock name, for both modes. A release frees the row
-- (token '', expires_at 0) rather than deleting it, so that the next
-- grant's fence is the row's last one plus one. Names are bytes
-- (VARBINARY): compared exactly, whatever the collations of the server,
-- the database and the connection. expires_at is in microseconds since
-- 1970 on the database's UTC clock, so the session's time_zone plays no
-- part.
CREATE TABLE IF NOT EXISTS {{table}} (
    name       VARBINARY(1024) NOT NULL PRIMARY KEY,
    token      VARBINARY(255)  NOT NULL,
    fence      BIGINT UNSIGNED NOT NULL,
    expires_at BIGINT          NOT NULL
) ENGINE=InnoDB
