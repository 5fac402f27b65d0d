// Package dlockprom exports Prometheus metrics of dlock's locks. A
// Collector observes the events of every lock of the clients it is given
// to (see dlock.Observer) and is registered like any prometheus.Collector:
//
//	metrics := dlockprom.New()
//	prometheus.MustRegister(metrics)
//	client := redislock.New(conn, redislock.WithObserver(metrics))
//
// # Metrics
//
// Every metric has the labels lock, the lock's name as given to the
// backend (a zklock lock's path), and kind, the kind of lock in the words
// of dlock run --kind and of dlock.LogObserver's logs: "mutex", "fair",
// "read" (an RWMutex's reader), "write" (its writer), "semaphore", and
// "reentrant" and "session" for a ReentrantMutex and a SessionMutex. (Earlier
// versions put the Go names in the kind label, "Mutex", "FairMutex",
// "RWMutex.read" and so on: queries and alerts that match on them need
// the new words.)
//
//	dlock_acquisitions_total{result}  counter: Lock and TryLock calls that
//	                                  ended: acquired, not_obtained (taken,
//	                                  or the call gave up) or error
//	dlock_wait_seconds                histogram: how long calls that
//	                                  acquired took, waiting included
//	dlock_holders                     gauge: leases held now
//	dlock_waiting                     gauge: Lock calls waiting now
//	dlock_renewals_total{result}      counter: renewals by the watchdog or
//	                                  Refresh (zklock: confirmations that
//	                                  extended the lease), ok or failed
//	dlock_losses_total{cause}         counter: leases lost, by cause:
//	                                  expired, taken_over, session_expired,
//	                                  closed or other (see Cause)
//	dlock_hold_seconds                histogram: how long leases were held,
//	                                  until released or lost
//	dlock_fenced_writes_total{result} counter: writes checked by a guard of
//	                                  package fence (given the Collector
//	                                  with fence.WithObserver): accepted,
//	                                  or stale; lock is the resource, kind
//	                                  the guard ("SQL", "Row", "Redis",
//	                                  "Memory")
//
// The gauges count the leases and waiters of the observed clients of this
// process; sum them over processes for a whole deployment. A lease lost
// after a failed renewal counts one failed renewal and one loss.
//
// # Cardinality
//
// Lock names become label values, and every name gets its own series of
// every metric (about 50, with the histograms' buckets). That is right for
// a bounded set of locks ("nightly-report", "inventory"); it is not for
// names that carry an id ("order:81723"), where every id would add series
// for ever. Map such names to a bounded set with WithLockLabel, or Forget
// the series of a lock that is done with. Striped locks are named
// "name:0" ... "name:n-1": n series each.
package dlockprom
