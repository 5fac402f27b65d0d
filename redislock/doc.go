// Package redislock implements dlock's locks on one Redis deployment:
// standalone, Sentinel or Cluster, Redis 6.2 or later: Mutex,
// ReentrantMutex, FairMutex, RWMutex, Semaphore, Latch, MultiLock, Striped
// and elections.
//
// # Usage
//
// Wrap the Redis client you already have (package goredisconn for go-redis
// v9, with ContextTimeoutEnabled; package rueidisconn for rueidis), then
// lock by name:
//
//	locks := redislock.New(goredisconn.New(rdb))
//	defer locks.Close()
//	lease, err := locks.NewMutex("nightly-report").Lock(ctx)
//	if err != nil { ... }
//	defer lease.Release(ctx)
//	// pass lease.Fence() to the resource; watch lease.Done()
//
// The Example functions show every kind.
//
// # Guarantees
//
// A Mutex is a key, dlock:{name}, set with SET NX PX to a random 128-bit
// owner token; acquiring, refreshing and releasing are one Lua script
// each, compare-and-act on the token. Uncontended, an acquire runs three
// commands on the server and a release two. A release wakes the client
// that has waited longest (see Waiting).
//
// Every grant carries a fence that strictly increases on its deployment:
// after a loss of the fence counter (a restart without the data, or a
// replica promoted with a counter that had not caught up), as long as the
// failover takes longer than 100ms (every automatic one does) and the
// clocks of the old and the new server agree to within the failover's
// time. While two masters grant at once (an isolated old master during a
// failover, without WithReplicas), their fences interleave; the resource
// that checks them refuses the lower, and so never takes a stale write.
// The argument is in docs/ARCHITECTURE.md.
//
// # Keys, and how long they last
//
// Every key dlock writes for a name expires: nothing of a lock remains
// once its last holder and waiter are gone, within these horizons.
//
//   - the lock (every kind) and its markers: with the lease, at most one
//     TTL after its last renewal;
//   - a FairMutex's queue and its waiters' timeouts: at most the longest
//     waiter's wait after the last waiter left;
//   - an RWMutex's queue of waiting writers: at most min(TTL, 2s) after the
//     last one left;
//   - a Mutex's line of waiting clients, dlock:{name}:waiting: one second
//     plus the longest wait of the retry strategy (at least 50ms) after the
//     last join of the client that waits longest between its tries, and
//     at once when the last one leaves (a join only ever extends the
//     line's expiry, so that no client can shorten another's place);
//   - a Semaphore's limit set by SetPermits or AddPermits: one TTL after
//     the last permit (NewSemaphore's n applies again after that);
//   - a Latch's count: 24 hours after it was last set or counted down;
//   - the record of an AddPermits, SetPermits or CountDown request: twenty
//     minutes (see Calls that must run once).
//
// The one kind of key that stays is the fence counter: one per Cluster
// slot, dlock:fence:{tag}, where tag is a short string that hashes to the
// slot of the name, so at most 16384 per deployment however many names are
// used, each on the node of the names it serves.
//
// One name serves one kind of lock at a time: the main key tells which
// kind holds it, and a lock of another kind gets an error matching
// dlock.ErrNotObtained and dlock.ErrKindMismatch that names both kinds,
// from Lock as from TryLock: Lock does not wait for another kind. Redis
// keeps no queue across kinds, so a Lock already waiting for a holder of
// its own kind returns the same error if another kind takes the name
// before it. Once the name is free, any kind may take it.
//
// # Other libraries' locks
//
// WithBareKey makes a Mutex (or Striped's mutexes) lock the named key
// itself, in the layout of bsm/redislock, redsync, redis-py's Lock and
// node-redlock (SET key token NX PX ttl, compare-and-delete,
// compare-and-PEXPIRE), so that dlock and those libraries exclude each
// other on the same key, dlock keeping its fence, watchdog, Until and
// Done. Its waiters poll for the other libraries' releases, 8ms to 64ms
// apart by default. The other kinds refuse it (ErrBareKeyUnsupported).
// See docs/interop-redis.md, which has a guide to moving from those
// libraries with a rolling deploy.
//
// # Leases, renewal and loss
//
// A lease is renewed by its Client's watchdog every TTL/3 until it is
// released; one scheduler per Client renews every due lease in one pipelined
// round trip. A lease's Until is the send time of its last successful
// acquire or renewal plus the TTL, less 1% of the TTL and 2ms for clock
// drift. Done closes at Until if no renewal has succeeded by then (the
// server is unreachable or paused, or answers that it cannot serve for now,
// see Faults), and at the first renewal that finds the key gone or owned
// by someone else. Either way, Err says why.
//
// A lock can be lost while its holder is still working: a process pause
// longer than the TTL cannot be prevented by any lock service. Check
// Lease.Done or Lease.Context before acting, and pass Lease.Fence to the
// resource you protect so that it can refuse a holder whose fence is stale.
//
// # Waiting
//
// Lock waits for a notice from the holder's release, which wakes one
// waiting client (one attempt per hand-over, not one per waiting client),
// and also retries when the holder's TTL runs out and after a backoff from
// its RetryStrategy (at least 50ms apart while its Client stands in line),
// in case a notice is lost: no wait depends on a notice. Each Client has
// one pub/sub connection, shared by all its waiters, checked by a PING
// after a second of silence and replaced when the PING is not answered.
// A Mutex is not strictly fair: a newcomer can take a free lock before the
// woken client; see FairMutex. A ReentrantMutex's waiters wait in the same
// way.
//
// # Calls that must run once
//
// dlock never lets a transport re-send its scripts (a call whose reply is
// lost may still run on the server), and sends again only what is safe to
// run twice (see docs/ARCHITECTURE.md).
//
//   - Semaphore.AddPermits, Semaphore.SetPermits and Latch.CountDown carry
//     a request id; the server records the outcome of each id for twenty
//     minutes, a refusal and a latch not counting included, so a copy that
//     runs again changes nothing, even one held up on its connection until
//     after a later copy was answered. When their reply
//     is lost they send the same request again until the server answers,
//     ctx is done, or four minutes have passed since the first copy: a
//     copy sent later could still be retransmitted by TCP (for up to about
//     15 minutes) after the record expired, and change the count twice.
//     A later copy that the server turns away for a while (BUSY, LOADING,
//     a Cluster's TRYAGAIN) is sent again, as a lost one is; an error reply
//     to it that the script did not record says nothing of the earlier
//     copies, and the outcome is then unknown.
//     Each call takes effect exactly once, or, when no answer came, at
//     most once, and the error matches ErrOutcomeUnknown. A paused server
//     runs the copies it holds when it resumes: one that it runs more than
//     twenty minutes after the first changes the count again.
//
// # Faults
//
// Every call to the server is bounded by AttemptTimeout (1s), whatever its
// context says, with rueidis and with go-redis's ContextTimeoutEnabled: a
// server that has not answered by then, or that refused or reset the
// connection, is unavailable, as is one that answers that it cannot serve
// the call for now (LOADING, BUSY, TRYAGAIN, a redirect the client did not
// follow, CLUSTERDOWN, MASTERDOWN, NOREPLICAS, READONLY after a failover,
// MISCONF, OOM). TryLock then returns an error matching
// dlock.ErrUnavailable, and not dlock.ErrNotObtained, within
// AttemptTimeout (plus WithReplicas' timeout): a *dlock.UnavailableError
// that names the deployment and says since when it has failed. Lock of
// every kind waits through such failures as through a held lock, trying
// again as its retry strategy says, until its context ends; its error
// then matches dlock.ErrNotObtained, the context's error and, if the
// server was still failing, dlock.ErrUnavailable (a refusal or reset
// that came before the context ended counts, however late it is looked
// at). (A Lock whose context
// ends within the first AttemptTimeout of a server's silence has seen no
// failure yet, and reports none.) A reply of the list above that never
// changes keeps Lock waiting all the same, since dlock cannot tell it from
// one that will: READONLY from a replica the client points at (not a
// master that a failover demoted), OOM from a server whose memory is full
// of keys without an expiry under maxmemory-policy noeviction. Lock then
// returns when its context ends, and its error quotes the reply: give
// Lock a deadline. What waiting cannot heal fails at once:
// any other error reply (NOAUTH, WRONGPASS, NOPERM, a key of another type,
// a script the server refuses), a go-redis client that was closed or a
// Redis client never given (redisconn.ErrUnusable), a TLS handshake refused
// on the certificates, by either side, or met by a server that does not
// speak TLS, a bad name or option, a closed Client, a lock of another kind.
// (rueidis reports a client that was closed with the error it gives while
// it cannot connect, ErrClosing: a closed rueidis client looks
// unavailable.) Release on such a server ends the lease and returns within
// AttemptTimeout an error matching dlock.ErrUnavailable (and the
// context's error, if its context ended first): a release that may have
// run, or was turned away, is sent again in the background until the
// Client closes; the lock otherwise expires within its TTL. Client.Close
// waits for the server at most one second.
//
// # Observing
//
// WithObserver gives a Client a dlock.Observer (package dlockprom makes
// Prometheus metrics of it), and WithLogger a slog.Logger, to report the
// events of every lock of the Client: the start of each Lock and TryLock,
// the moment a Lock begins to wait, its outcome with the time it took, and
// each lease's renewals, failed renewals, loss and release, with how long
// it was held. Events carry the lock's name as given to NewMutex (not the
// Redis key) and its kind: "Mutex", "ReentrantMutex", "FairMutex",
// "RWMutex.read", "RWMutex.write" or "Semaphore". A MultiLock reports
// through its locks' Clients, and a Striped lock as its stripes. Without
// an observer, reporting costs a nil check.
//
// # Transports
//
// The Client talks to Redis through a Conn. Package goredisconn adapts a
// go-redis v9 client, and package rueidisconn a rueidis client. Both send
// the calls that many goroutines make at the same time together: rueidis
// by its automatic pipelining, goredisconn by sending the calls that
// arrive while one is in flight as one pipeline when it is answered. A
// lone call is sent at once either way. Many calls then cost one write and
// one read, on the client and on the server, which is most of a call's
// cost on a local network.
//
// # Limits
//
//   - A lock can be lost while its holder is still working (a process
//     pause longer than the TTL): check Done and pass the fence to the
//     resource (package fence).
//   - On Sentinel or Cluster, a master that dies before replicating a fresh
//     lock lets the promoted replica grant it again, and while two masters
//     grant at once fences do not follow grant order: use WithReplicas.
//   - Fences increase across a failover only if the clocks of the old and
//     the new server agree to within the failover's time.
//   - A reply that never changes (READONLY from a replica, OOM under
//     noeviction) keeps Lock waiting until its context ends: give Lock a
//     deadline.
//   - A closed rueidis client looks unavailable, not unusable.
//   - A paused server that runs a held copy of AddPermits, SetPermits or
//     CountDown more than twenty minutes after the first changes the count
//     again.
//
// # See also
//
// How each kind works, its keys and scripts, the waiting line, the calls
// that must run once, and why fences increase:
// https://github.com/dlock-go/dlock/blob/main/docs/ARCHITECTURE.md#redislock.
// Measured behaviour under faults (Sentinel, Cluster, TLS):
// https://github.com/dlock-go/dlock/blob/main/docs/SAFETY.md.
package redislock
