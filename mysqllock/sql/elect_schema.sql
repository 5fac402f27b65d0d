-- elect_schema.sql: the leaders of a Client's elections (Client.NewElection),
-- one row per election name: the leader's owner token, and its record
-- (term, token and value), valid while the token holds the name's row in
-- {{table}}. The first election call that finds it missing creates it.
CREATE TABLE IF NOT EXISTS {{leaders}} (
    name   VARBINARY(1024) NOT NULL PRIMARY KEY,
    token  VARBINARY(255)  NOT NULL,
    record BLOB            NOT NULL
) ENGINE=InnoDB
