// Package redislock implements dlock's locks on one Redis deployment:
// standalone, Sentinel or Cluster, Redis 6.2 or later.
//
// # How a Mutex works
//
// The lock is a key, dlock:{name}, set with SET NX PX to a random 128-bit
// owner token. Acquiring it is one Lua script that also increments the
// fence counter of the name's Cluster slot (below). Releasing is a
// compare-and-delete that also wakes the client that has waited longest
// (see Waiting); refreshing is a compare-and-pexpire. Scripts run
// by EVALSHA, falling back to EVAL when the server's script cache is empty.
// Uncontended, an acquire runs three commands on the server (SET, TIME,
// and SET ... GET of the fence counter, see Why fences strictly increase)
// and a release two (GET, DEL): an acquire that finds
// the lock held marks its value (a trailing byte 1, a control character,
// which no token holds whatever its label), and only a marked lock's
// release publishes.
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
// # Why fences strictly increase
//
// A Mutex's fence is the server's clock in microseconds (TIME), or the
// slot's counter plus one if the counter is not behind the clock (two
// grants within a microsecond, or a clock stepped back); the counter is
// set to the fence in the same step. The other kinds add one to the
// counter, and lift it to the clock whenever it is more than 100ms behind.
// The counter never goes down. It also stays within 100ms of the clock,
// and one server grants less than one lock per microsecond, so every fence
// a server drew is at most its clock at the time plus a few: after a loss
// of the counter (a restart without the data, or a replica promoted with
// a counter that had not caught up), if the failover takes longer than
// 100ms (every automatic one does), the next fence is above every earlier
// one, as long as the clocks of the old and the new server agree to within
// the failover's time. While two masters grant at once (an isolated old master
// during a failover, without WithReplicas), their fences interleave; the
// resource that checks them refuses the lower, and so never takes a stale
// write.
//
// One name serves one kind of lock at a time: the main key tells which
// kind holds it, and a lock of another kind gets an error matching
// dlock.ErrNotObtained and dlock.ErrKindMismatch that names both kinds,
// from Lock as from TryLock: Lock does not wait for another kind. Redis
// keeps no queue across kinds, so a Lock already waiting for a holder of
// its own kind returns the same error if another kind takes the name
// before it. Once the name is free, any kind may take it.
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
// Lock first tries once. If the lock is held, the waiter subscribes to its
// Client's own channel for the lock, dlock:{name}:wake:<client id> (one
// pub/sub connection per Client, shared by all its waiters), and tries
// again; that attempt, if it fails, puts the Client in the lock's line of
// waiting clients, a sorted set ordered by when each began to wait. A
// release takes the first client out of the line and publishes on its
// channel alone (passing over, up to three times, a client that no longer
// listens), and that client wakes one of its waiters: one attempt per
// hand-over, not one per waiting client. A woken client that loses the race
// to a newcomer goes back to its old place; one that has no waiter left
// passes its turn to the next client. A client whose release woke another
// joins the line at the back at once when it asks again, without trying
// first, so that it does not race the client it woke. A waiter also retries when the
// holder's TTL runs out, and after a backoff from its RetryStrategy (at
// least 50ms apart while its Client stands in line), in case a notice is
// lost. No wait depends on a notice: a new waiter waits for the server to
// confirm its subscription at most 250ms, and the pub/sub connection is
// sent a PING when it has carried nothing for a second while channels are
// subscribed, and replaced (every channel subscribed again on a new one)
// when the PING is not answered within another second, as after a
// firewall dropped the idle connection. A Mutex is not strictly fair: a newcomer can take a free lock
// before the woken client; see FairMutex. A ReentrantMutex's waiters wait
// in the same way, and the release of its owner's last hold wakes the first
// client in the line.
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
// server was still failing, dlock.ErrUnavailable. (A Lock whose context
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
// # Calls that must run once
//
// A call whose reply is late or lost (a read timeout, a reset connection,
// a paused server) may still run on the server, once or, if a transport
// sent it again, twice. dlock never lets a transport re-send its scripts:
// goredisconn marks them NoRetry for go-redis, whose default is to re-send
// a timed-out command up to three times, and rueidis re-sends only
// read-only commands. dlock decides what to send again itself, and sends
// again only what is safe to run twice:
//
//   - An attempt whose reply is lost is given back in the background: its
//     release, keyed by the attempt's own token (a reentrant hold by its
//     own hold id), deletes only what that attempt took. The clean-up
//     keeps trying while the server cannot be reached or cannot serve it
//     (see Faults), however long, and
//     then looks a few more times over about four seconds, since a request
//     buffered on a paused server runs when the server resumes. Once
//     Close has begun, each clean-up looks once more and stops (see
//     Client.Close).
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
//   - A reentrant hold's release gives up that hold only, however often it
//     runs; re-entering or renewing never shortens the lock's expiry below
//     what another hold of the owner was promised.
//   - A call that converts or hands over a hold (RWMutex.Downgrade) ends
//     the old lease before it sends the request, so the old lease is never
//     trusted while another holder may have been granted.
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
package redislock
