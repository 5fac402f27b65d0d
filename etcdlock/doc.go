// Package etcdlock implements dlock's locks on an etcd cluster, through the
// official client (go.etcd.io/etcd/client/v3): a Mutex whose keys are those
// of etcd's own concurrency.Mutex, an RWMutex, a Semaphore, and an
// election that is one with concurrency.Election, all made from one
// Client.
//
// # Usage
//
// Give New the *clientv3.Client you already have (New never closes it):
//
//	locks := etcdlock.New(cli)
//	defer locks.Close()
//	lease, err := locks.NewMutex("locks/nightly-report").Lock(ctx)
//	if err != nil { ... }
//	defer lease.Release(ctx)
//	// pass lease.Fence() to the resource; watch lease.Done()
//
// See Example for a complete program.
//
// # How a Mutex works
//
// Each contender grants itself an etcd lease and puts the key
// name/<lease ID in hex> on it; the key with the lowest create revision
// holds the lock. An uncontended Lock is two requests. Every other
// contender watches only the key created just before its own, so a
// release wakes exactly one waiter, and waiters are served in the order
// they arrived.
//
// The keys are laid out as concurrency.Mutex lays out its keys on the same
// prefix (it takes name and appends "/"), so a Mutex and a concurrency.Mutex
// exclude each other: each waits for the older keys of both. A
// concurrency.Mutex's key holds "" rather than a token. Their holders learn
// of a loss at different times, though: a concurrency.Session's Done closes
// when its keep-alive loop gives up, which checks its deadline only every
// 500ms, so under a partition a Mutex waiter was granted the lock 0.52 to
// 0.64s before the cut-off concurrency.Mutex holder's Session.Done closed.
// A holder that must not overlap reads a fence, or on etcd's side
// IsOwner in its writes.
//
// The names "a" and "a/b" are two locks, as on every backend: the keys of
// "a/b" lie under the prefix "a/" too, and the locks of "a" read past them
// (a lock reads the key names under its prefix, values left out, and keeps
// those of its own shapes). A concurrency.Mutex on "a" does not: it waits
// for the keys of "a/b" as well. A name whose last segment is "read",
// "write", "permits-..." or empty ("a/read", "a/") is refused: its keys
// would have the shape of keys of the lock of the name above it (an
// RWMutex's, a Semaphore's, a Mutex's), which would read them as its own,
// and whose ForceUnlock would delete them. Names must be valid UTF-8.
//
// # Leases
//
// Each grant has an etcd lease of its own, granted for WithTTL rounded up
// to whole seconds (etcd's unit; the cluster raises a TTL below its minimum,
// one and a half election timeouts, to that minimum). The Client's watchdog
// renews it with a keep-alive every third of the lease time, and checks in
// the same round that the key is still there. A keep-alive sent at time s
// that the cluster answers proves that the etcd lease lives until at least
// s plus its TTL on the leader's clock (a new leader extends every lease to
// a full TTL, never shortens it), so the lease's Until becomes
//
//	s + min(TTL, etcd lease TTL) - (1% + 2ms)
//
// A renewal counts only when the cluster's current leader made it, so a
// deposed leader that still answers keep-alives from its own lease table
// (etcd-io/etcd#15247) cannot extend a lease: this holds on every etcd
// 3.4 and later (the argument is in docs/ARCHITECTURE.md). A request that
// does not answer within a third of the renewal period is made again
// through the next endpoint, so a member that stops answering holds up an
// attempt, not the lease.
//
// Done closes no later than Until, by a local timer, even when the cluster
// cannot be reached: a holder cut off from the cluster learns it has lost
// the lock before the cluster could expire its key. A lease whose etcd lease
// is gone (it expired on the server, or was revoked) ends with an error
// matching dlock.ErrLost and ErrLeaseNotFound; one whose key was deleted
// (ForceUnlock, or an operator) with dlock.ErrLost and dlock.ErrTakenOver.
// Waiters' etcd leases are renewed too, so a waiter keeps its place for as
// long as it waits.
//
// Release deletes the key if it is still the lease's (one transaction: the
// next waiter's notification) and then revokes the etcd lease. A lease
// ended by its holder's own deadline (a fixed lease's end, WithMaxHold), or
// found gone, revokes its etcd lease in the background, so the next waiter
// does not wait for the cluster to expire it. A renewed lease that reached
// its Until because no renewal got through (an election longer than the
// lease time, a holder cut off) is not revoked: the cluster expires it one
// etcd lease TTL after the last renewal it received, and a new leader only
// ever extends that, so the next holder comes in no earlier than the old
// Until, and usually later by the rest of the etcd lease TTL. A holder
// still in its critical section when Done closed (it has not looked yet)
// has that margin, as on the other backends; only fences make it safe.
//
// # What etcdlock needs of the server
//
// etcd 3.4.31, 3.5.13 or 3.6.0, or later in the same line
// (MinServerVersions). An older leader whose raft loop stalls past a
// lease's TTL (a slow disk, a starved CPU) and comes back can revoke leases
// the new leader kept alive, which deletes a held lock's key while its
// holder's Until is still ahead (etcd-io/etcd#15247, fixed by
// etcd-io/etcd#16822). Renewals themselves are safe on any 3.4 or later
// (see Leases). A Client asks every endpoint for its version at its first
// Lock or TryLock (New makes no request) and logs an older one once at
// Warn; WithStrictServerVersion refuses it.
//
// No etcd release closes this for a leader frozen whole, its process
// stopped (SIGSTOP, a VM or container freeze) for longer than a lease's
// TTL: the server's check before such a revoke is skipped by a member that
// ticked in its last heartbeats (etcd-io/etcd#18428, from 3.4.34, 3.5.16
// and 3.6.0), and a resumed process ticks at once. Only 3.4.31 to 3.4.33
// and 3.5.13 to 3.5.15 check it. A test of ours, holders on the followers,
// the leader stopped 6s at TTL 3s, saw a waiter granted up to 2.9s before
// a holder's Until on 3.6.16 (2 rounds of 3) and 2.1s on 3.4.23 (1 of 3).
// The holder learns it at its next renewal, at most a third of the TTL
// later; fence every write. Run etcd where its members are not frozen
// whole, or on 3.5.13 to 3.5.15.
//
// # Fencing
//
// A grant's fence is its key's create revision. etcd's revision is one
// counter for the whole cluster, raised by every write and kept through
// leader changes (it is part of the replicated log), so a later holder of a
// name, whose key was created after the earlier holder's, has a larger
// fence: fences strictly increase across the holders of a name, even
// across a leader kill or a restart of every member. Revisions stay below
// 2^53 until a cluster has made a million writes a second for 285 years, so
// JSON and JavaScript consumers read them exactly.
//
// The revision lives in the cluster's data and goes with it. A cluster
// restored from a backup (etcdctl snapshot restore) starts again at the
// snapshot's revision, and one that lost every member's data at 1: fences
// granted afterwards repeat, or fall below, fences granted before, and a
// fenced resource would refuse the new holders until it forgot the old
// fences. Restore with etcdutl snapshot restore --bump-revision (etcdutl
// of etcd 3.6, and of the later 3.5 releases) by more than the revisions
// written since the snapshot, with --mark-compacted, and fences keep
// increasing; or reset the resource's fence when the cluster is restored. The conformance suite checks that the
// fences do start again after a restart without data
// (dlocktest.Backend.FencesRestartWithData).
//
// # Kinds
//
// One name serves one kind of lock at a time. An RWMutex's keys are
// name/read/<lease> and name/write/<lease>, a Semaphore's
// name/permits-<n>/<lease>; all queue by create revision under name/, and
// no key is granted past a key of another kind of lock queued ahead of it
// (a permit waits for a Mutex's key ahead, as a reader does for a
// writer's). TryLock and Lock of a name whose oldest key, its holder, is
// another kind's return at once an error matching dlock.ErrNotObtained
// and ErrKindMismatch; Lock does not wait for it. A key under name/ that
// no lock writes is an error for both. A Semaphore's waiter reads the
// keys ahead of it, up to n+1 of them, at each look.
//
// What etcdlock does not offer, as the other backends do: a ReentrantMutex
// and RWMutex.Downgrade.
//
// # Elections with concurrency.Election
//
// NewElection(name) and etcd's concurrency.NewElection(session, name) are
// one election. Each candidate's key is name/<its etcd lease ID in hex>,
// holding the value it campaigns with from the moment it is queued; the
// key with the lowest create revision leads, and its create revision is
// the term: a dlock leader's Fence is what concurrency.Election.Rev
// returns for it, and a concurrency leader's Rev is the Term dlock's
// Leader reports. Neither side campaigns past a leader of the other; each
// side's Leader and Observe name the other's leaders with their values;
// a Resign on either side deletes the leader's key, and the oldest
// candidate of either side, woken by its watch, leads (on a loopback
// server on 2 cores under a load of 20: a dlock candidate 5 to 14ms after
// a concurrency leader's Resign call, a concurrency candidate 7 to 92ms
// after a dlock leader's). What the layout cannot carry:
//
//   - The owner token and its label (dlock.WithLabel): a candidate's key
//     holds its value, as concurrency.Election's does. Inspect shows an
//     election's leader with Owner its value, cut as any Owner, and no
//     Label; its Lease's Token is kept only by the process.
//   - A concurrency leader's Proclaim changes its value, not its term:
//     dlock's Leader reports the new value; Observe, which sends each term
//     once, does not.
//   - A value with the shape of an owner token (22 characters of A-Z, a-z,
//     0-9, "-" and "_", alone or followed by "~"; a shortuuid, or 16 bytes
//     in URL-safe base64) is what a Mutex's key holds, and what a
//     candidate of the earlier layout (below) holds until it has won:
//     dlock's Leader and Observe take a key that holds one as it was first
//     written (its etcd version is 1) for no leader. A dlock candidate
//     that campaigns with such a value writes it again once it has won, so
//     it is named from the moment its Campaign returns rather than a
//     moment before; a concurrency candidate's is named once it has
//     Proclaimed it. A concurrency.Mutex's holder, whose key holds "", is
//     named as a leader with the value "", as concurrency.Election names
//     it.
//   - Leader and Observe name a candidate as soon as its key is the oldest,
//     as concurrency.Election's do: a moment before its Campaign returns,
//     and also a candidate that never leads, whose Campaign fails as it
//     comes first (its ctx ended, or its grant was too short to use and it
//     queued again); its term is below the next leader's, so Observe's
//     order holds. (The earlier layout named a leader once it had won and
//     written its record.)
//   - The two sides learn of a loss at different times, as for a Mutex
//     (see How a Mutex works): fence what a leader does, with its term.
//   - The keys of an election called name/sub are under name/ too: while
//     one of them is the oldest there, concurrency.Election on name names
//     name/sub's leader as its own. dlock's elections read past them, as
//     its locks do: name and name/sub are two elections. Give elections
//     that concurrency.Election also joins names that are not below each
//     other.
//
// Until this layout, dlock's leader kept its owner token in its key while
// it waited and, once it led, a record "term\ntoken\nvalue" in place of
// it. During a rolling deploy from that layout, both keep the same keys in
// the same order, so there is never more than one leader, and a Campaign
// of either waits for the other's. This layout's Leader and Observe read an
// earlier leader's record (written over its token, with its key's create
// revision as the term and an owner token on the second line; any other
// value is a value, line breaks and all) and take it for no leader before
// it has written one; Inspect shows its token and label, as before. The
// earlier layout's Leader and Observe do not read this one's keys: while a
// leader of this layout (or a concurrency leader) leads, they report no
// leader if its value has no line break, and otherwise an error, or a
// wrong value if it reads as a record. Observers that must not miss a leader are upgraded before the
// candidates; otherwise old observers see no leader while new ones lead.
//
// # Nothing left behind
//
// Every key is on its grant's etcd lease and goes with it: at the release,
// at the clean-up of a failed or abandoned attempt (a revoke, waited for up
// to five seconds, or a third of the renewal period and at most a second
// after a Lock's ctx ended, then retried in the background; a Lock whose
// revoke fails so reports the cluster unavailable), and at the latest when
// the cluster expires the etcd lease, one TTL (rounded up to seconds) after
// its last renewal. Close waits for the clean-ups. Nothing is kept per name.
//
// # Faults
//
// Lock waits through what heals: an endpoint that refuses or resets
// connections or does not answer, a cluster without a leader, an
// election, a request that timed out. Each request has an attempt's time
// (see Leases; for the requests that queue, a ninth of the TTL, at least
// 100ms) and is made again, through the next endpoint, as the
// RetryStrategy says (DefaultRetry: 10ms doubling to a second). When a
// connection has failed on every endpoint, each attempt makes the client
// connect again at once, rather than when gRPC's own backoff (up to two
// minutes) would: a Lock waiting through a 12s outage was granted 60ms
// to 210ms after the cluster was back, where it took up to 7.4s. When ctx
// ends first, the error matches dlock.ErrUnavailable as well as
// dlock.ErrNotObtained and ctx.Err(): a *dlock.UnavailableError naming
// the endpoints, since when the requests have failed, and the last
// failure. What waiting does not heal fails at once: a permission the
// user lacks (etcdserver: permission denied), a bad name or option, a
// lock of another kind, a closed Client. A wrong password fails
// clientv3.New itself.
//
// TryLock waits for a cluster that does not answer at most the lock's TTL,
// but at least 2 seconds and at most 5 (a grant later than the TTL could
// not be used), and returns then an error matching dlock.ErrUnavailable,
// never dlock.ErrNotObtained: whether the lock is held is unknown. When
// no endpoint accepts a connection (refused, or failed), it returns so as
// soon as the client finds it, or after half a second of trying again
// when the client's connection was failing already: 0 to 1ms on an
// endpoint where nothing listens, where it took its whole bound. Refresh
// returns by the lease's Until, and Release within TryLock's bound, on a
// cluster that does not answer, whatever their ctx. A Release that got no
// answer returns an error matching dlock.ErrUnavailable and ends the lease
// as released; what it could not revoke is revoked in the background, and
// expires at worst one TTL after its last renewal.
//
// Close waits for the cluster a second at most for the releases, and a
// second and a half in all. A Lock or TryLock under way returns at once,
// with an error matching both ErrClosed and dlock.ErrNotObtained.
//
// # Observing
//
// WithObserver gives a Client a dlock.Observer (package dlockprom makes
// Prometheus metrics of it), and WithLogger a slog.Logger, to report the
// events of every lock of the Client. Events carry the lock's name and its
// kind: "Mutex", "RWMutex.read", "RWMutex.write" or "Semaphore".
//
// # Limits
//
//   - A lock can be lost while its holder still acts (a pause longer than
//     the lease time): check Done and pass the fence to the resource.
//   - etcd older than 3.4.31, 3.5.13 or 3.6.0 can revoke a held lock's key
//     after a stalled leader comes back; and no release is safe against a
//     leader frozen whole (SIGSTOP, a VM freeze) for longer than a TTL
//     except 3.4.31 to 3.4.33 and 3.5.13 to 3.5.15 (see What etcdlock
//     needs of the server).
//   - A cluster restored from a snapshot, or that lost its data, repeats
//     fences unless restored with --bump-revision (see Fencing).
//   - The etcd lease TTL is whole seconds, raised by the cluster to its
//     minimum.
//   - No ReentrantMutex and no RWMutex.Downgrade.
//   - An election's leader keeps its campaign value in its key, not its
//     owner token: Inspect shows no token or label for it (see Elections
//     with concurrency.Election).
//
// # See also
//
// How the acquisition, the renewals and the deposed-leader check work:
// https://github.com/dlock-go/dlock/blob/main/docs/ARCHITECTURE.md#etcdlock.
// Measured behaviour under faults:
// https://github.com/dlock-go/dlock/blob/main/docs/SAFETY.md.
// etcd's own lock: https://pkg.go.dev/go.etcd.io/etcd/client/v3/concurrency.
package etcdlock
