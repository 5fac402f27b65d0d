-- session_drop.sql: on a connection whose attempt got GET_LOCK lock ?1
-- but not the row: let go of the GET_LOCK lock.
DO RELEASE_LOCK(?)
