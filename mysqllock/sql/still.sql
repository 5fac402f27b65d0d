-- still.sql: which of the locks named in ?1 are still held by one of the
-- owner tokens in ?2: the name and token of each.
SELECT name, token FROM {{table}} WHERE name IN (?1) AND token IN (?2)
