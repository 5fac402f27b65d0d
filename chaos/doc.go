// Package chaos is dlock's fault-injection harness: it runs clients that
// contend for one lock against real servers, injects real faults, records
// every operation on one monotonic clock, and checks the history.
//
// Run starts the servers of a backend on loopback ports (one Redis, with
// or without an fsync'd append-only file; Redlock over 3 or 5 Redis
// servers without persistence, or over 3 that save an RDB snapshot every
// second; a ZooKeeper ensemble of 3; one PostgreSQL server, for pglock's
// lease mode or its session mode; a master, two replicas and three
// Sentinels, for redislock without and with WithReplicas; a Redis Cluster
// of three masters with a replica each, likewise), a Store (the
// protected resource), and client processes, each reaching each server
// through a TCP proxy of its own; with Options.TLS, through TLS with a
// client certificate and a password. Every client loops: Lock, enter its critical section, read the
// fenced register, read the Store's set, work, write the set back with one
// more element, write the fenced register with its lease's fence, leave,
// Release. The clients are
// deliberately naive: they do not look at Done inside the critical
// section, as a client paused at the wrong instant could not either.
//
// Between quiet gaps, Run injects faults from FaultsFor, round-robin or
// at random with a seed: kill -9 of a server and its restart, with
// whatever it persisted (nothing, its last snapshot, or every write) or
// without its data; SIGSTOP of a server; latency, blackholes and reset
// connections through the proxies; early expiry of the lock key on one
// Redis server (standing in for a forward jump of its clock); SIGSTOP of
// the holder's process past its TTL (a GC pause) and a partition of the
// holder; on ZooKeeper, the leader's death, the expiry of the holder's
// session and the whole ensemble restarted without its data; on
// PostgreSQL, pg_terminate_backend of the holder's backends; and, on
// Sentinel, the master killed, paused or cut off from its replicas and the
// Sentinels (not from the clients) until Sentinel promotes a replica, and
// then restored until Sentinel has made it a replica, or cut off from its
// replicas alone for a while; on Cluster, the same
// to the master of the lock's slot (cut off from every other node), and the
// slot moved to another master, key by key, while the lock is held.
//
// Check reads the History and reports overlapping valid leases,
// overlapping critical sections, stale fenced writes accepted, fence
// regressions, refusals of the current holder, lost updates to the
// unfenced set, Lock calls that failed instead of waiting, and whether
// the clients' calls to the fenced register form a linearizable history
// (checked with porcupine against a model of the register); and, by kind
// of fault, the time from the fault's start and from its end to the next
// grant. Each violation is put down to the fault in whose window it
// happened, and Expect says whether that fault on that backend is a
// documented physical limit (a client paused past its TTL overlaps the
// next holder; a single Redis that restarts empty forgets its locks) or a
// failure. A failed Lock and a register history that is not
// linearizable are never within the limits; a stale write accepted or a
// fence regression only where two masters grant at once (see Expect).
// docs/SAFETY.md holds the matrix and measured results.
//
// A program that calls Run must call RunClientIfChild first thing in
// main (or TestMain): the clients are copies of it.
package chaos
