// Package zklock implements dlock's locks on a ZooKeeper ensemble, with the
// recipes ZooKeeper's own documentation gives: a Mutex (and a
// ReentrantMutex), an RWMutex and a Semaphore, all made from one Client.
//
// # Usage
//
// A Client is one ZooKeeper session, on a connection it makes itself:
//
//	locks, err := zklock.New(ctx, []string{"zk1:2181", "zk2:2181", "zk3:2181"})
//	if err != nil { ... }
//	defer locks.Close()
//	lease, err := locks.NewMutex("/locks/nightly-report").Lock(ctx)
//	if err != nil { ... }
//	defer lease.Release(ctx)
//	// pass lease.Fence() to the resource; watch lease.Done()
//
// The Example functions show every kind.
//
// # How a Mutex works
//
// Each contender creates an ephemeral sequential child of the lock's path;
// the lowest holds the lock, and every other contender watches only the
// child just ahead of it. So a release wakes exactly one waiter, and
// waiters are served in the order they arrived. A create whose reply was
// lost is found again rather than repeated, so no orphan node blocks the
// queue. Missing parents are created as container nodes. A parent that
// goes before the node under it is created (the ensemble reaps an empty
// container; another client may delete empty parents) is created again,
// up to 100 times in one attempt; past that, Lock and TryLock return an
// error naming the path.
//
// The paths /a and /a/b are two locks, as every backend's names "a" and
// "a/b" are: a lock leaves out the children of its path that no lock
// node is named like (the path of another lock, or a node of the user's),
// as Curator's recipes do. A path segment named like a lock node is
// refused, and a Semaphore on /a counts the nodes under /a/locks and
// /a/leases (Curator's layout) as its own.
//
// Because nodes are ephemeral, a client that crashes or is cut off loses
// its lock when the ensemble expires its session; no TTL has to be guessed
// for that.
//
// # Leases and the session
//
// A Client is one ZooKeeper session on its own connection. The ensemble
// expires it when it has not heard from the client for the session timeout
// T, and deletes all its nodes. A lease is therefore confirmed by a round
// trip: the acquire's own listing, then, in the background every third of
// the lease time, a sync (which travels to the leader, so a server cut off
// from the leader cannot answer it from a stale state) and an Exists of
// the node; one sync and one batch of pipelined Exists serve all of a
// Client's due leases. A confirmation sent at time s proves the ensemble
// heard from the client after s; the lease's Until becomes
//
//	s + min(TTL, T/3) - (1% + 2ms)
//
// Done closes no later than Until, by a local timer, even when the
// ensemble cannot be reached. While the connection is down, Lease.Suspended
// and Client.Suspended report true: ownership is uncertain until the
// client reconnects in the same session (the lease holds on, if a
// confirmation gets through by Until) or the ensemble reports the session
// expired (every lease of it ends at once, with an error matching
// dlock.ErrLost and ErrSessionExpired, and the Client carries on with a
// new session). A lease that ended by its Until while its node may still
// exist deletes the node in the background, so the next waiter does not
// wait for the session to expire.
//
// A connection down for the whole session timeout T means the session is
// gone, so, as Curator does, a Client whose connection has not got its
// session back T after it went down gives the session up: leases of it
// still held (none: each ended by its Until) end with ErrSessionExpired,
// the nodes it knows of are deleted in the background, and the Client
// opens a new connection with a new session, on which waiting and later
// calls carry on. This also gets a Client past an ensemble restarted
// without its data, which refuses the old session for ever.
//
// WithTTL sets the lease time; WithoutRenewal makes a fixed lease that ends
// one TTL after it was granted or refreshed. Choose the session timeout
// with elections in mind: during one, no confirmation gets through, and a
// lease ends after T/3 without one. A 3-node ensemble on one machine with a
// 200ms tick elects a new leader in well under a second; production
// ensembles take longer.
//
// # An ensemble that loses its data
//
// The ensemble's data is what makes a lock exclusive. An ensemble
// restarted without it (every server's snapshots and transaction logs
// lost at once) knows no lock and no session, and grants a lock to the
// next client at once, while the old holder's lease lasts until its
// Until: up to min(TTL, T/3) after its last confirmation. A test with
// T = 9s measured the next holder granted 1.6s (a 3-node ensemble) and
// 2.1s (one server) before the old holder's Until. This is ZooKeeper's
// counterpart of a Redis server restarted without persistence, and the
// same remedies apply: keep the ensemble's data on disks that survive a
// restart (ZooKeeper writes every transaction to its log before it
// answers), never wipe a majority of the servers at once, and fence
// writes: fences keep increasing across the loss (see Fencing), so a
// fenced resource refuses the old holder's late writes. The old holder
// learns by its Until, as for any outage; its Client then starts a new
// session as described above.
//
// # Fencing
//
// Every grant's fence is
//
//	(ctime(parent) - 2020-01-01) · 2^12 + sequence(node)
//
// where ctime is the lock path's creation time in milliseconds (set by the
// ensemble leader's clock) and sequence is the number ZooKeeper appended
// to the holder's node. It strictly increases from holder to holder of a
// path, also when the path is reaped or lost with the ensemble's data and
// created again (the argument is in docs/ARCHITECTURE.md). No counter
// node is needed, so none is left per lock name.
//
// Fences stay below 2^53, so JSON and JavaScript consumers (jq, dlock
// inspect -o json) read them exactly, until September 2089. Fences from
// versions of zklock before this one were ctime · 2^20 + sequence (about
// 1.9·10^18); those of 2026 are about 8.9·10^14, so a resource that stored a
// fence of an earlier version must forget it when the clients upgrade,
// and one path must not be locked by both versions at once.
//
// The holders of a shared lock (RWMutex readers, Semaphore leases) are
// ordered by their place in the queue: every grant's fence is larger than
// those of all the grants it had to wait for, and smaller than those of
// all the grants that wait for it. A lease from Downgrade, like a
// re-entered hold, keeps the fence of the write lease it came from.
//
// # Nothing left behind
//
// Every lock node is ephemeral: it goes with its release, with the
// clean-up of a failed or abandoned attempt (done in the background), and
// at the latest with its session (Close closes it; the ensemble expires
// the session of a client that died, T after it last heard from it). A
// lock path, and any of its parents that were missing, are container
// nodes, which the ensemble deletes once they have had a child and have
// none left, at its container check (znode.container.checkIntervalMs, a
// minute by default; at most znode.container.maxPerMinute, 10,000 by
// default, a minute): a path no lock uses any more is gone within one
// check interval per level of the path that the lock created. A path
// created by an attempt that then failed before it made its node has never
// had a child, so the ensemble would keep it: the attempt deletes it. Close
// waits for these clean-ups, a second and a half at most in all (see
// Faults). Nothing is kept per lock
// name beyond that: fences need no counter node (see Fencing). Before
// ZooKeeper 3.5.3 there are no container nodes, and the paths the locks
// create stay.
//
// # Faults
//
// Lock waits through what heals: a server that refuses or resets
// connections or does not answer, an election, a session that moves to
// another server or is renewed, and one that expired (it queues again in
// the new session). It makes its requests again once the Client has
// reconnected; a connection whose connect request the server does not
// answer within two thirds of the session timeout (a server that accepts
// connections while it starts, say) is dropped and dialled again, unless
// it takes back the session of a Client with a single server (there is no
// other server to try: the Client waits for the answer until it gives the
// session up, a session timeout after the connection was lost). When
// ctx ends first, its error matches
// dlock.ErrUnavailable as well as dlock.ErrNotObtained and ctx.Err(): a
// *dlock.UnavailableError naming the servers, since when the requests
// have failed, and the last failure. What waiting does not heal fails at
// once: a node the credentials may not create or read (zk.ErrNoAuth; see
// WithDigestAuth), a bad path or option, a lock of another kind, a closed
// Client.
//
// TryLock waits for an ensemble that does not answer, or refuses
// connections, at most the lock's TTL, but at least 2 seconds and at most
// 5 (a grant later than the TTL could not be used), and returns then an
// error matching dlock.ErrUnavailable, never dlock.ErrNotObtained:
// whether the lock is held is unknown. Refresh returns by the lease's
// Until, and Release within TryLock's bound, on an ensemble that does not
// answer, whatever their ctx. A Release that got no answer returns an
// error matching dlock.ErrUnavailable and ends the lease as released; the
// node it could not delete is deleted in the background, or goes with the
// session.
//
// Close waits for the ensemble a second at most for the releases, and a
// second and a half in all; a node it could not delete goes when the
// ensemble expires the session. A Lock or TryLock under way returns at
// once, with an error matching both ErrClosed and dlock.ErrNotObtained.
//
// # Observing
//
// WithObserver gives a Client a dlock.Observer (package dlockprom makes
// Prometheus metrics of it), and WithLogger a slog.Logger, to report the
// events of every lock of the Client: the start of each Lock and TryLock,
// the moment a Lock begins to wait for the node ahead of it, its outcome,
// and each lease's confirmations that extend its Until (EventRenewed),
// failed confirmations, loss (ErrSessionExpired when the session expired)
// and release. Events carry the lock's path as given to NewMutex,
// NewReentrantMutex, NewRWMutex or NewSemaphore, and its kind: "Mutex",
// "ReentrantMutex", "RWMutex.read", "RWMutex.write" or "Semaphore". Each
// reentrant hold is an acquisition of its own. Without an observer, reporting costs a nil check.
//
// # Security
//
// Without WithTLS the connection is plain TCP: the session, the locks'
// tokens and the credentials of WithDigestAuth travel in clear. WithTLS
// speaks TLS with each server's secure client port (secureClientPort,
// with the Netty connection factory); a failed handshake, such as an
// untrusted certificate or a refused client certificate, makes New's
// error when ctx is done, which also names a handshake still under way
// then (a server slow to answer, or silent). WithDigestAuth makes the
// nodes the Client creates its user's alone.
//
// ZooKeeper gives the right to delete a node by its parent's ACL, not
// the node's own: whoever may delete the children of a lock's path may
// delete its holder's node, and the next node in line then holds. A path
// the Client creates gets the Client's ACL; a path another made first,
// open to all, would let anyone take the lock from an authenticated
// holder. So a Client made with WithDigestAuth or WithACL (unless its ACL
// gives everyone those rights anyway) reads the ACL of each lock path it
// queues under, once its node is there, and refuses the path, removing
// its node, with an error matching ErrPathACL that names the path and
// who else may create, delete or change the ACL there. It reads it again
// whenever the path is made anew or its ACL changes. The parents of the
// path need no check: while the path holds a node it cannot be deleted,
// and a path deleted while empty and made again with another ACL is
// refused at the next Lock. Set the ACLs of paths made by hand (such as
// a shared root for the locks) to the Client's.
//
// # Kinds
//
// One path serves one kind of lock at a time. A Lock or TryLock that finds
// the path held by another kind of lock (its lowest node is another
// kind's) returns at once an error naming both kinds that matches
// dlock.ErrNotObtained and dlock.ErrKindMismatch; Lock does not wait for
// it. A node of another kind queued behind the holder (an attempt giving
// up, or a Curator mutex) is waited for by the nodes behind it: no node
// holds past a node of another kind ahead of it, and Inspect counts it as
// a waiter. Nodes that no lock made are an error, and so is a Lock or
// TryLock whose ctx carries a lease of another kind on the same path (a
// Mutex asked under a Semaphore lease's Context, ErrKindMismatch with
// ErrNotObtained):
// re-entry takes another hold only of a node of its own kind.
//
// # Apache Curator and go-zookeeper
//
// zklock's locks and Curator's recipes on the same path are one lock, so a
// service on dlock and one on Curator (or go-zookeeper's zk.Lock) exclude
// each other, both ways:
//
//   - Mutex, ReentrantMutex and Election: Curator's InterProcessMutex
//     (and LeaderSelector, which is built on it) and zk.Lock. Their nodes
//     are named alike ("lock-"), and each holds when its node is the
//     lowest. A Curator leader publishes no value: while one leads,
//     zklock's Leader reports no leader.
//   - RWMutex: Curator's InterProcessReadWriteLock. Readers' and writers'
//     nodes are named as Curator's ("__READ__", "__WRIT__"), and the rules
//     are Curator's: a writer holds when its node is the lowest, a reader
//     when no writer's node is ahead of it. Curator's readers do not read
//     zklock's downgrade mark: they wait for a downgraded zklock writer
//     until it is released (zklock's readers do not). Readers and writers
//     of earlier zklock versions ("read-", "write-") are still waited for
//     by zklock, but Curator does not see them; an earlier version that
//     meets the new names fails with an error naming the node, rather than
//     holding beside them.
//   - Semaphore: Curator's InterProcessSemaphoreV2 of as many leases. A
//     zklock lease takes two nodes: its own under the path, which orders
//     it among zklock's locks and gives its fence, and then a lease of
//     Curator's layout, taken as Curator takes one (under Curator's mutex
//     on path/locks, a node under path/leases, held once path/leases has
//     no more children than permits), so that the holders of both sides
//     together never outnumber the permits. The lease node goes with the
//     lease. The lease is granted once both are taken: a TTL without
//     renewal, and WithMaxHold, count from then; and a Lock whose nodes
//     go while it waits for Curator's lease (with its session, say)
//     queues again. TryLock is refused at once when Curator's leases are all
//     taken, or another taker holds Curator's mutex. Each of its two steps (its own node, then Curator's lease)
//     waits for an ensemble that does not answer at most TryLock's bound
//     (see Faults), so a Semaphore's TryLock can take twice that before it
//     returns an error matching dlock.ErrUnavailable.
//
// What Curator's layouts cannot carry degrades as follows. Curator's nodes
// carry no fence: Curator's holders have none, and zklock's fences order
// zklock's grants only (a zklock grant's fence is still above those of
// every zklock grant it waited for). A Curator semaphore's nodes do not
// say its number of leases: both sides must be made with the same number,
// which nothing checks. Inspect and ForceUnlock see the holders of
// Curator's mutex and read-write lock, but not those of its semaphore,
// which live under path/leases (ForceUnlock of a zklock Semaphore deletes
// its permit nodes; their Curator leases go when their holders learn of
// the loss, at their next confirmation); and a Curator semaphore on a path that a
// zklock Mutex or RWMutex uses is not reported as another kind. A zklock
// Semaphore's lease is confirmed (see Leases and the session) by both its
// nodes: one deleted ends it as lost, within a confirmation period, as a
// Curator taker may then hold the permit it stood for. Its Curator lease
// node goes with its session, or when the lease ends. A Semaphore acquisition costs about six more round trips
// than before (Curator's mutex and its lease node).
//
// Curator's LeaderLatch does not interoperate, and cannot while zklock's
// Election pairs with LeaderSelector. A LeaderLatch creates
// "<path>/_c_<uuid>-latch-<sequence>" (protected, ephemeral sequential,
// its id as the data) and sorts the children of the path by the text after
// the last "latch-" in each name, or by the whole name when there is none
// (StandardLockInternalsDriver.standardFixForSorting): a zklock node
// ("lock-<sequence>"), or any other, sorts after every latch node, since
// digits sort before letters and "_". A LeaderLatch started on a path
// where a zklock Election leads therefore leads beside it, and the zklock
// leader is not told (TestIntegrationCuratorLeaderLatchNotShared). No node
// name serves both recipes: ZooKeeper appends the sequence to the name, so
// a node is ordered by its sequence either in LeaderLatch (its name ends in
// "latch-") or in InterProcessMutex and LeaderSelector ("lock-"), not both.
// zklock refuses a path that holds a latch node: a Campaign, Lock,
// TryLock or Leader that lists the path's children (a waiter, when it
// next looks) returns at once an error naming the node, never a
// leadership; only a leader that already leads does not list them. So:
//
//   - Pair zklock's Election with Curator's LeaderSelector on the Java side
//     (it is built on InterProcessMutex; TestIntegrationCuratorLeaderSelector).
//     Moving a service from LeaderLatch to LeaderSelector is a code change on
//     its side (takeLeadership in place of await and hasLeadership).
//   - Never start a LeaderLatch on a path that a zklock lock or election
//     uses. To move a service off LeaderLatch with a rolling deploy, give
//     the zklock election a path of its own and switch the service's code
//     to it, or stop every LeaderLatch participant before the first zklock
//     candidate starts on the path.
//
// # Limits
//
//   - A lock can be lost while its holder still acts (a pause longer than
//     the lease time): check Done and pass the fence to the resource.
//   - A lease lasts at most min(TTL, T/3) past its last confirmation, and
//     ends during an election that lasts longer: choose the session timeout
//     with elections in mind.
//   - An ensemble restarted without its data grants the lock to the next
//     client at once, while the old holder's lease lasts until its Until;
//     only fencing protects the resource then (see above).
//   - Fences: a leader clock set back by more than the old parent's
//     lifetime, a parent made, reaped and made again within a millisecond,
//     and ZooKeeper's sequence overflow after 2^31 changes to one path are
//     not covered; fences of zklock before the 2^12 layout must not meet
//     these on one resource or path.
//   - Without WithTLS the session, tokens and credentials travel in clear;
//     a lock path whose ACL lets others delete children lets them take the
//     lock (refused with ErrPathACL under WithDigestAuth or WithACL).
//   - Before ZooKeeper 3.5.3 there are no container nodes, and the paths
//     the locks create stay.
//
// # See also
//
// How the session, the confirmations and the give-up work, why a lease
// lasts T/3, and why fences increase:
// https://github.com/dlock-go/dlock/blob/main/docs/ARCHITECTURE.md#zklock.
// Measured behaviour under faults:
// https://github.com/dlock-go/dlock/blob/main/docs/SAFETY.md.
// The recipes: https://zookeeper.apache.org/doc/current/recipes.html.
package zklock
