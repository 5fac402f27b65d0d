-- join_line: put a client in a Mutex's line of waiting clients (see
-- acquire.lua) without trying to take the lock: a client that has just
-- released the lock and woken another joins the line at once, behind the
-- clients already there, instead of racing the one it woke.
-- KEYS[1] lock key          KEYS[2] the waiting clients
-- ARGV[1] the client's id   ARGV[2] its score   ARGV[3] how long its place is kept, in ms
-- Returns the holder's remaining TTL in ms; -1 when it is held by a holder
-- already marked (see acquire.lua; its TTL is not read); or 0 when the
-- lock is free (the woken client is on its way: its release will wake the
-- next in line).
-- A holder not yet marked is marked (see acquire.lua), so that its release
-- wakes the line. Every step can run twice with the same outcome.
dlock_join(KEYS[2], ARGV[1], ARGV[2], ARGV[3])
local holder = redis.pcall('GET', KEYS[1])
if type(holder) ~= 'string' then -- free, or not a Mutex's: its own release wakes no line
  return 0
end
if string.sub(holder, -1) == '\1' then -- marked already: its release wakes the line
  return -1
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl > 0 and string.sub(holder, 1, 1) ~= '=' then
  redis.call('SET', KEYS[1], holder .. '\1', 'XX', 'PX', pttl)
end
return math.max(pttl, 0)
