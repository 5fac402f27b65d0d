// Package redlock implements the Redlock algorithm over N independent Redis
// masters, with fencing tokens and detection of nodes that lost their data.
// It offers a Mutex, and elections whose leader holds one; no reentrant,
// fair, read-write or semaphore kinds.
//
// # Acquiring
//
// An attempt sends one script to every node at once, each call bounded by
// the node timeout (WithNodeTimeout, 50ms by default). On each node the
// script sets the lock key with SET NX PX and, in the same step,
// increments the node's fence counter and reports how long its server has
// been running and the age of its data (see below). The attempt
// is decided as soon as a majority (N/2+1) has voted for it, or so many
// have refused, failed or abstained that a majority is out of reach; it
// does not wait for slow nodes. A failed attempt deletes its key on every
// node that took it, or may still take it (a call that timed out), in the
// background.
//
// A won vote is then fenced (below), and the lease is granted only if the
// remaining validity, TTL − elapsed − (TTL/100 + 2ms), is still positive.
// Until is the attempt's start plus the TTL less that drift allowance.
// When nothing failed, a grant takes one round trip to the nodes and a
// release one more: the fence is written back only when the nodes'
// counters disagree. Each node then runs eight commands per lock and
// release: EVALSHA, LASTSAVE, HMGET, SET and INCR to acquire, EVALSHA,
// GET and DEL to release. A name whose Cluster slot has no fence counter
// yet on a node adds TIME and SET there (below), and so does a node not
// yet seen to outlast the restart window, with INFO when it restarted.
//
// # Extending, losing and releasing
//
// The watchdog extends a lease every TTL/3 (the first time after TTL/10
// when a node did not take the key at the grant, or had not answered),
// with one pipelined round trip per node for all due leases of a Client.
// An extension counts only if a majority extended it before the current
// Until; otherwise the lease ends at Until. When more nodes than a majority can spare report that the key
// is no longer this lease's, the lease ends at once with dlock.ErrTakenOver.
//
// A lease can be granted on a bare majority: a competitor's failed attempt
// held the other nodes, and deletes its keys there only afterwards. So
// once a majority has extended a lease, by the watchdog or by Refresh, the
// nodes that answered that its key is absent (not held by another owner,
// and not silent) are taken back: a script sets the key there with the
// lease's token and TTL only if it is absent, one pipelined call per node
// for all such leases of a batch, and no call at all when every node held
// the key. The watchdog does this in the background, after waiting at most
// the node timeout for the nodes that had not answered when the extension
// was decided. A retake never counts as an extension, and a lease that no
// majority extended takes nothing back: keys deleted on a majority (by
// ForceUnlock) still end it with dlock.ErrTakenOver. Nor does a renewal
// that was under way when an operator's ForceUnlock ran: ForceUnlock
// records the tokens it deleted in dlock:{name}:deposed on every node, and
// the retake sets no key for a token recorded there; each token is kept
// twice the longest time the deleted keys had left. A retake under way
// when Release begins has returned before the release sends its deletes,
// and none is sent after; a node whose retake call failed without a reply
// is looked at again, as one whose acquire timed out is (below).
//
// Release returns once a majority has deleted the key, or so many nodes
// have answered otherwise that no majority can (dlock.ErrTakenOver); it
// waits for them until the lease's Until, not only one node timeout, since
// a release that comes late is still true; if the lease runs out first,
// Release returns an error matching dlock.ErrNotHeld, as after Until, that
// also names the nodes that did not answer. When nodes that could not be
// reached, did not answer or turned the release away kept it from a
// majority, its error matches dlock.ErrUnavailable. The other nodes get
// the node timeout, and their deletes finish in the background, retried
// while a node cannot be reached (until the TTL has passed, when the key
// has expired by itself) and looked at three times more over 1.3 seconds
// on a node whose acquire may still land late. Close waits for the nodes one
// second in all: when it begins, every clean-up makes one last try on each
// node it has left, bounded by the node timeout, and stops. A key that an
// acquire still on its way sets after that, on a minority, expires within
// its TTL.
//
// # Faults
//
// Every call to a node is bounded by the node timeout, whatever the node's
// Conn does (go-redis without ContextTimeoutEnabled ends a call only at its
// ReadTimeout): a node that has not answered by then counts as failed, and
// its call, which may still run, is cleaned up as one that timed out. So
// one node that is down, silent or refusing costs a grant nothing when a
// majority answers (one round trip to it), and Inspect and ForceUnlock the
// node timeout at most. An attempt fails as unavailable when so many nodes
// could not be reached, did not answer, answered that they cannot serve
// the call for now (LOADING, BUSY, ...; see the redislock package), sit
// out their restart window, or refuse for good (below), that no majority
// could vote: TryLock then returns, within the node timeout (twice it when
// a grant writes its fence back), an error matching dlock.ErrUnavailable
// and not dlock.ErrNotObtained, a *dlock.UnavailableError naming the
// nodes. When a
// majority answered and voted otherwise, the error matches
// dlock.ErrNotObtained. Lock waits through both, as its retry strategy
// says, until its context ends; its error then matches
// dlock.ErrNotObtained, the context's error and, if no majority could
// vote, dlock.ErrUnavailable. What waiting cannot heal (an error reply
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
// A node is judged, in the acquire script itself, by how long its server
// has run. The script reads uptime_in_seconds from INFO server and keeps,
// in the node's epoch hash dlock:epoch, the latest time the server can
// have started, with the LASTSAVE reading it was computed at; LASTSAVE is
// the server's start until its first save, so it changes on every restart,
// and INFO is read again only then (and after each save). The hash also
// records when the node's data began (created), and the largest restart
// window the node has been seen to outlast, in both its uptime and its
// data's age, at the LASTSAVE reading kept (ripe; computing boot again
// clears it). Neither shrinks while LASTSAVE reads the same and the hash
// remains (a restart changes LASTSAVE; a loss of data takes the hash, and
// ripe with it), so a ripe node votes without the script reading its
// clock. How each persistence setting fares:
//
//   - No persistence: a restart loses every key. The server's uptime
//     starts again, and the node abstains until it reaches the window.
//   - RDB snapshots (Redis's default): a restart loads the last snapshot,
//     which lacks the keys set since, but holds an old epoch and old
//     fence counters. The uptime starts again (the epoch's LASTSAVE
//     reading no longer matches), and the node abstains as above. Its
//     counters are lifted before it votes (see fences, below).
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
// # Why fences strictly increase
//
// Each node keeps a fence counter per Cluster slot (see package
// rediskeys), a plain counter: the acquire script that takes a node's key
// increments it in the same step, so nodes that took the same keys hold
// the same value. The script lifts the counter to the node's clock, in
// microseconds rounded up to 100ms (so that nodes whose clocks agree lift
// it to the same value), when the counter is missing or below the node's
// clock reading at the end of the restart window that followed its
// server's start, and only once that window has passed: within it, a
// missing counter is not created.
//
// The client's fence f is the largest value read from the nodes that took
// its key (a node without a counter counts its clock, rounded up). If they
// all read the same value, a majority W (the voters) already holds f, set
// by the step that took the key. Otherwise f is written back, as a
// monotonic maximum, to every node that took the key, by a script that
// writes only while the node still holds this lease's key, and the lease
// is granted only if a majority W confirmed.
//
// Every counter value, on any node, at any real time t, is at most t + S +
// 100ms, where S bounds how far ahead of real time a node's clock runs:
// values come from clock readings rounded up, from increments (one per
// script, and a script takes more than a microsecond), or are copies of
// such values. Let a later holder win a majority B. W and B share a node
// n. On n, the counter reached f while n held our key, and the later
// holder's script took n's key after ours had left it: it ran later. If n
// kept its data, that script read at least f+1, and the later fence is
// larger. If n lost its data in between, at a restart at time r after our
// grant, it voted for the later holder only once its server had run for
// the restart window w. Its counter then was missing, or restored from
// before r and so below r + w on its clock (given w exceeds S plus how
// far behind a clock runs, S′, plus 100ms), and was lifted, after the
// window, to a clock reading of at least r + w − S′, more than f ≤ r + S +
// 100ms; or it had been written back after r, with another attempt's
// fence, larger than f by the same argument. Neither argument uses a
// client's clock, so a client whose clock jumps or that pauses cannot make
// a later fence smaller; a client paused past its lease keeps an old
// fence, which is what lets the protected resource refuse it. The second
// relies on the nodes' clocks agreeing to within the restart window less
// 100ms. A node that loses its data without a restart (above) lifts its
// counter at once: fences still increase if the loss comes more than
// S + S′ + 100ms after the last grant.
//
// A renewal may take the key, later, on nodes outside W (see Extending,
// above), with our token and TTL and without touching their counters. The
// argument needs only W: any later majority B still shares a node with W,
// whatever other nodes hold our key, and a key taken outside W can only
// keep a later holder from that node for longer.
//
// The write-back costs one more round trip. It happens when the counters
// of the nodes that took the key disagree: on the first grant of a slot
// whose nodes' clocks straddle a 100ms step, and on a grant after a node
// missed others (it was down, slow, or held by a failed attempt) or lifted
// its counter after a restart. Uncontended, with every node up, a grant
// writes nothing back. A node whose counter lags cannot lower a fence: any
// majority includes a node of the last grant's majority W, which reads
// more than the lagging node, so the counters disagree and the largest is
// taken; only when every node that took the key read the same value is
// the write-back skipped. A ripe node's script does not read the clock,
// but every lift still does: no counter value depends on a reading not
// taken.
package redlock
