// Package fence is the resource's half of a safe lock: guards that take
// the fence of a lease, from any dlock backend, and refuse a write whose
// fence is lower than one the resource has already accepted.
//
// A lock alone cannot keep a paused holder from writing: a process stopped
// past its lease (by a garbage collector, a full disk, SIGSTOP) wakes up
// believing it still holds the lock while another holder writes. Every
// grant carries a fence that is higher than every earlier grant's of the
// same lock; a resource that remembers the highest fence it has accepted
// and refuses lower ones turns the late write into an error, ErrStale,
// instead of lost data.
//
// One guard per kind of resource:
//
//   - SQL, for any database/sql driver (PostgreSQL, MySQL or MariaDB,
//     SQLite): Check inside the caller's transaction, or WriteFenced;
//     Row for a table whose rows carry their own fence column.
//   - Redis, for a user's own keys: Set and HSet that refuse a stale
//     fence, on a server that writes every write to disk before it
//     answers (appendonly yes, appendfsync always), which the guard
//     checks: a server that forgets fences lets a stale write through.
//   - HTTP: Handler, middleware that reads the fence from the Dlock-Fence
//     header, and Transport, which puts it on every request.
//   - Files: WriteFile replaces a file only if its fence is not stale;
//     the fence it records beside the file is replaced as atomically as
//     the file, so a writer killed at any step leaves one fence or the
//     other, never none.
//
// All guards accept an equal fence: one holder may write many times under
// one lease. A resource must be guarded by one lock, whose fences alone it
// compares. Resources whose names differ, by as little as a trailing
// blank or a letter's case, never share a fence (see RedisKey for how a
// Redis key that is all one hash tag, "{x}", is kept apart from "x").
// Nor can a guarded resource be one of the guard's own records: WriteFile
// refuses names ending in ".fence" or ".fence.lock", and the Redis guard
// keys beginning with "dlock:".
//
// A guard trusts the fences it is given: a fence that no holder of the
// lock has, far above the lock's, makes every real holder stale from then
// on. Only a lock's holders may reach a guard (Handler's endpoint must
// authenticate its writers); WithMaxJump bounds how far one fence may
// jump; and Reset (see Resetter, and ResetFile) lets an operator set a
// resource's record back, reporting it to the guard's observer.
//
// A guard is only as good as its memory of the highest fence: a record
// that is lost or unreadable is refused, never read as "no fence yet",
// where the guard can tell. An SQL guard's fences are as durable as the
// database's commits, and its Store, which guards what lies outside the
// database, asks for or checks a commit that is on disk before the server
// answers; a Redis guard refuses a server that does not persist every
// write (AcceptFenceLoss takes the risk for both); WriteFile
// refuses a fence file that holds no fence, and says how to recover.
package fence
