// Package dlock is the vocabulary shared by every dlock backend: the
// [Locker] and [Lease] contract, the sentinel errors, owner tokens and
// retry strategies.
//
// A Locker hands out Leases. A Lease is a claim on a named lock that lasts
// until it is released or lost. It can always be lost: a process pause, a
// network partition or an expired TTL ends it whether or not the holder
// noticed. dlock never hides that. Every Lease reports its end on
// [Lease.Done], says why in [Lease.Err], and closes Done no later than
// [Lease.Until], the conservative deadline after which another holder may
// exist.
//
// Every grant carries a fencing token, [Lease.Fence], that strictly
// increases across successive holders of a key. Pass it to the resource the
// lock protects and have the resource refuse a write whose fence is lower
// than one it has already accepted: that is the only way to stay safe when
// a holder is paused past its lease.
//
// The backends live in sub-packages: redislock (one Redis deployment),
// redlock (a quorum of independent Redis masters), zklock (ZooKeeper),
// pglock (PostgreSQL), mysqllock (MySQL and MariaDB) and etcdlock (etcd).
// The conformance suite in dlocktest is what each of them passes.
package dlock
