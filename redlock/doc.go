// Package redlock implements the Redlock algorithm over N independent Redis
// masters, with fencing tokens and detection of nodes that lost their data.
// It offers a Mutex, and elections whose leader holds one; no reentrant,
// fair, read-write or semaphore kinds.
//
// # Usage
//
// Give New one redisconn.Conn per independent master (package goredisconn
// or rueidisconn wraps the client you already have; configure go-redis with
// ContextTimeoutEnabled), then lock by name:
//
//	locks := redlock.New(nodes)
//	defer locks.Close()
//	lease, err := locks.NewMutex("nightly-report").Lock(ctx)
//	if err != nil { ... }
//	defer lease.Release(ctx)
//	// pass lease.Fence() to the resource; watch lease.Done()
//
// See Example for a complete program.
//
// # Guarantees
//
//   - A lease is granted only when a majority (N/2+1) of the nodes took its
//     key, and only if the remaining validity, TTL − elapsed − (TTL/100 +
//     2ms), is still positive. Until is the attempt's start plus the TTL
//     less that drift allowance. An attempt does not wait for slow nodes:
//     it is decided as soon as a majority voted or is out of reach, and a
//     failed attempt deletes its keys in the background.
//   - When nothing failed, a grant takes one round trip to the nodes and a
//     release one more.
//   - The watchdog extends a lease every TTL/3 (the first time after TTL/10
//     when a node did not take the key at the grant, or had not answered).
//     An extension counts only if a majority extended it before the
//     current Until; otherwise the lease ends at Until. When more nodes
//     than a majority can spare report that the key is no longer this
//     lease's, the lease ends at once with dlock.ErrTakenOver.
//   - Release returns once a majority has deleted the key, waiting for the
//     nodes until the lease's Until; the other nodes finish in the
//     background, and Close waits for them one second in all. A key left
//     on a minority expires within its TTL. When nodes that could not be
//     reached, did not answer or turned the release away kept it from a
//     majority, its error matches dlock.ErrUnavailable.
//   - Fences strictly increase from grant to grant, across restarts of
//     nodes that lose their data, provided the nodes' clocks agree to
//     within the restart window less 100ms; neither a client's clock nor a
//     paused client can make a later fence smaller. The argument is in
//     docs/ARCHITECTURE.md.
//
// # Faults
//
// Every call to a node is bounded by the node timeout, whatever the node's
// Conn does (go-redis without ContextTimeoutEnabled ends a call only at its
// ReadTimeout): a node that has not answered by then counts as failed, and
// its call, which may still run, is cleaned up as one that timed out. So
// one node that is down, silent or refusing costs a grant nothing when a
// majority answers (one round trip to it), and Inspect and ForceUnlock the
// node timeout at most. (An election's reads of its leader wait up to the
// TTL: see Client.NewElection.) An attempt fails as unavailable when so many nodes
// could not be reached, did not answer, answered that they cannot serve
// the call for now (LOADING, BUSY, ...; see the redislock package), sit
// out their restart window, or refuse for good (below), that no majority
// could vote: TryLock then returns, within the node timeout (twice it when
// a grant writes its fence back), an error matching dlock.ErrUnavailable
// and not dlock.ErrNotObtained, a *dlock.UnavailableError naming the
// nodes. A round in which nodes failed waits, within the node timeout,
// for the replies that tell the two apart: a node that answers that the
// lock is held does not make it held while most of the others fail. When a
// majority answered and voted otherwise, the error matches
// dlock.ErrNotObtained. Lock waits through both, as its retry strategy
// says, until its context ends; its error then matches
// dlock.ErrNotObtained, the context's error and, if no majority could
// vote, dlock.ErrUnavailable: a round whose failures the nodes reported
// before the context ended counts, however late it is counted. What waiting cannot heal (an error reply
// such as NOAUTH, NOPERM or a refused script, a Redis client that was
// closed, a TLS handshake refused on the certificates) from more nodes
// than a majority can spare fails at once.
//
// # Observing
//
// WithObserver gives a Client a dlock.Observer (package dlockprom makes
// Prometheus metrics of it), and WithLogger a slog.Logger, to report the
// events of its locks: the start of each Lock and TryLock, the first
// attempt that fails and will be retried (EventWaiting), the outcome, and
// each lease's extensions, failed extensions (no majority extended it in
// time), loss and release. Events carry the name given to NewMutex and the
// kind "Mutex". Without an observer, reporting costs a nil check. The
// logger also hears, once per node, what the Client learns of the nodes'
// configuration (below); a warning that a node may evict lock keys goes to
// slog.Default() when the Client has no logger.
//
// # Nodes that lost their data
//
// A node that loses keys it held would vote for a second holder while the
// first one's lease is still valid on the other nodes. So a node that may
// have lost data abstains for the restart window (WithRestartWindow, 30s
// by default): it takes the key but does not vote, and no lease it had
// granted before the loss outlives the window. The window is a property of
// the deployment: every Client of the same nodes must use the same one, and
// a Client refuses a lock whose TTL is longer. An attempt that fails while
// nodes abstain says which, why and how long until they vote.
//
// How each persistence setting fares:
//
//   - No persistence: a restart loses every key. The server's uptime
//     starts again, and the node abstains until it reaches the window.
//   - RDB snapshots (Redis's default): a restart loads the last snapshot,
//     which lacks the keys set since, but holds an old epoch and old
//     fence counters. The uptime starts again (the epoch's LASTSAVE
//     reading no longer matches), and the node abstains as above. Its
//     counters are lifted before it votes (see Guarantees).
//   - AOF with appendfsync everysec (or no): a crash loses up to a second
//     or more of acknowledged writes. Treated as RDB.
//   - AOF with appendfsync always: every write is on disk before its
//     reply, so a restart loses nothing. A node whose appendonly is yes and
//     appendfsync always, as the Client last read them with CONFIG GET
//     (on first use, then every minute), and whose epoch is older than the
//     running server, votes at once after a restart. A node that refuses
//     CONFIG GET (ACL, rename-command) is treated as not persisting, and
//     the Client logs it. The setting read must also have been in force
//     before the restart.
//
// A node whose server has run longer than the window votes at once, even
// if dlock never used it before: a new deployment grants its first lock
// at once. A node started (or restarted) less than the window ago still
// abstains, since it cannot be told from one that restarted empty.
//
// What this does not cover. A node that loses data while its server keeps
// running: FLUSHALL, FLUSHDB or DEL of dlock's keys, a full sync that
// makes it a replica, or eviction. A Client that had seen the node's
// epoch before sees it change, and the node abstains for the window from
// then; another Client cannot tell the node from a new one, and it votes
// at once. Eviction deletes lock keys under memory pressure with any
// maxmemory-policy other than noeviction: the Client checks maxmemory and
// maxmemory-policy with CONFIG GET and warns (slog level Warn) when a node
// may evict. Restart detection needs INFO and LASTSAVE inside scripts;
// a node that refuses them fails every attempt with an error naming the
// fix. WithoutRestartDetection turns all of this off (unsafe).
//
// Nor does it cover a node that loses one lock key early, by a forward
// jump of its clock, a DEL or an eviction, while the holder stands on a
// bare majority: that node and those the holder does not stand on then
// make a majority for another client while the lease is valid. A holder
// stands on a bare majority from a grant that a competitor's attempt
// contested until its first renewal (TTL/10), which takes back the nodes
// the competitor freed, and while other nodes cannot be reached. A holder
// on more nodes keeps a majority, and its next renewal takes the node
// back.
//
// # Other libraries' locks
//
// WithBareKey makes a Mutex lock the named key itself on every node, in
// the layout of redsync's Redlock and node-redlock over the same masters
// (SET key token NX PX ttl, compare-and-delete, compare-and-PEXPIRE), so
// that they and dlock exclude each other, dlock keeping its fence, restart
// detection, watchdog, Until and Done. Its waiters poll for the other
// libraries' releases, 8ms to 64ms apart by default. Elections refuse it
// (ErrBareKeyUnsupported). Restart detection keeps only dlock's clients
// off a node that lost its data, not redsync's or node-redlock's: with
// them on the same masters, every node must persist with appendfsync
// always or stay down for a TTL after a crash. See docs/interop-redis.md.
//
// # Limits
//
//   - A node that loses data while its server keeps running (FLUSHALL,
//     FLUSHDB, DEL of dlock's keys, a full sync, eviction) may vote at once
//     for a second holder; see Nodes that lost their data.
//   - A holder standing on a bare majority (after a contested grant, until
//     its first renewal, or while other nodes cannot be reached) is not
//     protected against one of its nodes losing the key early (a forward
//     clock jump, a DEL, an eviction).
//   - Every Client of the same nodes must use the same restart window, and
//     no TTL may exceed it. WithoutRestartDetection is unsafe.
//   - The nodes' clocks must agree to within the restart window less 100ms
//     for fences to increase across a node's loss of data.
//   - Like every lease, a lock can be lost while its holder still acts:
//     pass the fence to the resource (package fence) and watch Done.
//
// # See also
//
// How the algorithm, the retakes, the clean-up and the fence argument
// work: https://github.com/dlock-go/dlock/blob/main/docs/ARCHITECTURE.md#redlock.
// Measured behaviour under faults (chaos runs):
// https://github.com/dlock-go/dlock/blob/main/docs/SAFETY.md.
// The algorithm: https://redis.io/docs/latest/develop/use/patterns/distributed-locks/.
package redlock
