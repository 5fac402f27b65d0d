-- refresh.sql: extend the rows of the lease-mode locks named in ?1, held
-- by the owner tokens in ?2, to ?3 microseconds from now, on the
-- database's clock: one batch of the watchdog, whose leases share a TTL.
-- Tokens are random and unique, so a row matches only with its own
-- token. The number of rows affected says whether every lease is still
-- held; if not, still.sql says which.
UPDATE {{table}} SET expires_at = {{now}} + ?3 WHERE name IN (?1) AND token IN (?2)
