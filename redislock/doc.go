// Package redislock implements dlock's locks on one Redis deployment:
// standalone, Sentinel or Cluster.
//
// # How a Mutex works
//
// The lock is a key, dlock:{name}, set with SET NX PX to a random 128-bit
// owner token. Acquiring it is one Lua script that also increments a fence
// counter, dlock:{name}:fence; a missing counter (a new name, or a restart
// that lost the data) starts again from the server time in microseconds. So
// the fence strictly increases across holders, even after such a restart, as
// long as the server's clock does not go backwards. Releasing is a
// compare-and-delete that also publishes on dlock:{name}:released, which
// wakes waiters at once; refreshing is a compare-and-pexpire. A lock's keys
// share the hash tag {name}, so in a Cluster they live on one slot. Scripts run by EVALSHA, falling back to
// EVAL when the server's script cache is empty.
//
// # Leases, renewal and loss
//
// A lease is renewed by its Client's watchdog every TTL/3 until it is
// released; one scheduler per Client renews every due lease in one pipelined
// round trip. A lease's Until is the send time of its last successful
// acquire or renewal plus the TTL, less 1% of the TTL and 2ms for clock
// drift. Done closes at Until if no renewal has succeeded by then (the
// server is unreachable or paused), and at the first renewal that finds the
// key gone or owned by someone else. Either way, Err says why.
//
// A lock can be lost while its holder is still working: a process pause
// longer than the TTL cannot be prevented by any lock service. Check
// Lease.Done or Lease.Context before acting, and pass Lease.Fence to the
// resource you protect so that it can refuse a holder whose fence is stale.
//
// # Waiting
//
// Lock first tries once. If the lock is held, the waiter subscribes to the
// lock's channel (one pub/sub connection per Client, shared by all its
// waiters) and retries at once when a release is published. It also retries
// when the holder's TTL runs out, and after a backoff from its
// RetryStrategy, in case a notice is lost. A Mutex is not fair; waiters race.
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
//     keeps trying while the server cannot be reached, however long, and
//     then looks a few more times over about four seconds, since a request
//     buffered on a paused server runs when the server resumes. Close
//     gives the clean-ups five seconds to finish.
//   - Semaphore.AddPermits, Semaphore.SetPermits and Latch.CountDown carry
//     a request id; the server records the outcome of each id for ten
//     minutes, so a copy that runs again changes nothing. When their reply
//     is lost they send the same request again until the server answers
//     or ctx is done: each call takes effect exactly once, or, if ctx ends
//     first, at most once, and the error says so.
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
// go-redis v9 client, and package rueidisconn a rueidis client, whose
// automatic pipelining gives more throughput with many goroutines.
package redislock
