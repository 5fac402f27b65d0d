// Package redlock implements the Redlock algorithm over N independent Redis
// masters, with fencing tokens and detection of nodes that lost their data.
//
// # Acquiring
//
// An attempt sends one script to every node at once, each call bounded by
// the node timeout (WithNodeTimeout, 50ms by default). On each node the
// script sets the lock key with SET NX PX and, in the same round trip,
// returns the node's fence counter, its clock, how long its server has been
// running and the age of its data (see below). The attempt is decided as soon as a majority (N/2+1) has voted for
// it, or so many have refused or failed that a majority is out of reach; it
// does not wait for slow nodes. A failed attempt deletes its key on every
// node, including those that had not answered yet, in the background;
// Close waits for these clean-ups (at most five seconds; a node that cannot
// be reached gets one last try), so that a process that fails to lock and
// exits at once leaves no key on a node that answered.
//
// A won vote is then fenced (below), and the lease is granted only if the
// remaining validity, TTL − elapsed − (TTL/100 + 2ms), is still positive.
// Until is the attempt's start plus the TTL less that drift allowance.
//
// # Extending and losing
//
// The watchdog extends a lease every TTL/3, with one pipelined round trip
// per node for all due leases of a Client. An extension counts only if a
// majority extended it before the current Until; otherwise the lease ends
// at Until. When more nodes than a majority can spare report that the key
// is no longer this lease's, the lease ends at once with dlock.ErrTakenOver.
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
// records when the node's data began (created). How each persistence
// setting fares:
//
//   - No persistence: a restart loses every key. The server's uptime
//     starts again, and the node abstains until it reaches the window.
//   - RDB snapshots (Redis's default): a restart loads the last snapshot,
//     which lacks the keys set since, but holds an old epoch and old
//     fence counters. The uptime starts again (the epoch's LASTSAVE
//     reading no longer matches), and the node abstains as above.
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
// # Why fences strictly increase
//
// After winning a majority A, the client computes the fence
// f = max(max of the counters read in A + 1, max of the server clocks read
// in A, in microseconds) and writes it, as a monotonic maximum, to the nodes
// of A with a script that does so only while the node still holds this
// lease's key. Only if a majority W of nodes accepted that write is the lease
// granted.
//
// Let a later holder win a majority B. W and B are both majorities of the
// same N nodes, so they share a node n. On n, our fence write happened while
// n held our key, and the later holder's SET NX happened while n held no
// key, so after our key had left n: the write came first. If n kept its
// data, the later holder read a counter of at least f on n and chose a fence
// of at least f+1. If n lost its data in between, restart detection kept it
// from voting for the restart window, so the later holder won B after that
// window, when its nodes' clocks read more than f, which was at most a
// clock reading taken at least one window earlier, plus one per grant
// since. Neither argument uses the client's clock, so a client whose
// clock jumps or that pauses cannot make a later fence smaller; a client
// paused past its lease keeps an old fence, which is what lets the protected
// resource refuse it. The second argument alone relies on the nodes' clocks
// agreeing to within the restart window.
//
// Fencing costs one more round trip per acquisition; bench/RESULTS.md
// measures it.
package redlock
