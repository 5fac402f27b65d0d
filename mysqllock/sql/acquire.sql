-- acquire.sql: take lock ?3 for owner token ?1 for ?2 microseconds if its
-- row is free or expired, on the database's clock, and the clock has
-- reached ?4, the end of the server's restart windows (0 for none; see
-- Client.gate), in one statement. One
-- row is affected when it was taken, and the OK packet's insert id (set by
-- LAST_INSERT_ID(expr)) is then the grant's fence; none when the row is
-- held or missing (create.sql then makes it).
--
-- The fence is the larger of the row's last fence plus one and the
-- database's clock in microseconds, computed under the row's lock from its
-- newest version (an InnoDB UPDATE reads the latest committed row, waiting
-- for a grant in flight), so it only increases; the package doc says why
-- it keeps increasing when the row is deleted or the database restored.
-- MySQL assigns left to right: expires_at, which the WHERE and the other
-- assignments do not read after it, comes last.
UPDATE {{table}}
SET token      = ?,
    fence      = LAST_INSERT_ID(GREATEST(fence + 1, {{now}})),
    expires_at = {{now}} + ?
WHERE name = ? AND expires_at <= {{now}} AND {{now}} >= ?
