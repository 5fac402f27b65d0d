// Package dlockotel reports dlock's locks to OpenTelemetry: each Lock and
// TryLock call as a span, each lease as a span with events, and the
// metrics of package dlockprom under OpenTelemetry's names. An Observer
// observes the events of every lock of the clients it is given to (see
// dlock.Observer):
//
//	obs := dlockotel.New() // the global tracer and meter providers
//	client := redislock.New(conn, redislock.WithObserver(obs))
//
// # Spans
//
// A Lock or TryLock call is a span called "dlock.lock", from the call's
// start to its end, so that a contended Lock shows its wait. Its
// attributes are dlock.backend ("redislock", "pglock", ...),
// dlock.lock.name, dlock.lock.kind ("mutex", "read", "write", ...: the
// words of dlock run --kind, as dlockprom's kind label), dlock.waited (the call found the lock taken), dlock.outcome (granted,
// not_obtained, cancelled, unavailable or error; see Outcome) and, when
// granted, dlock.fence. A call that failed with unavailable or error has
// an error status.
//
// A lease is a span called "dlock.lease", linked to the call's span, from
// the grant to the release or the loss, with the events granted, renewed,
// renew_failed, and released or lost; each carries dlock.fence, the end
// dlock.held (seconds) and a loss dlock.cause (see Cause). A lost lease
// has an error status.
//
// Both spans are children of the span in the context of the Lock or
// TryLock call: the backends give an Observer, a dlock.ContextObserver,
// the call's context with the call's events and the values of that
// context with the lease's. Events given to Observe, without a context,
// make spans with no parent. The spans are made when each call or lease
// ends, with the times it began and ended: a call still waiting, or a
// lease still held, has no span yet.
//
// # Metrics
//
// Every metric has the attributes dlock.lock.name and dlock.lock.kind, and
// dlock.backend for the events of a backend:
//
//	dlock.lock.acquisitions    counter {call}: Lock and TryLock calls that
//	                           ended, by dlock.result: acquired,
//	                           not_obtained (taken, or the call gave up)
//	                           or error
//	dlock.lock.wait.duration   histogram, s: how long calls that acquired
//	                           took, waiting included
//	dlock.leases.held          up-down counter {lease}: leases held now
//	dlock.lock.waiting         up-down counter {call}: Lock calls waiting now
//	dlock.lease.renewals       counter {renewal}: renewals by the watchdog
//	                           or Refresh, by dlock.result: ok or failed
//	dlock.lease.lost           counter {lease}: leases lost, by dlock.cause:
//	                           expired, taken_over, session_expired,
//	                           lease_not_found, closed or other
//	dlock.lease.hold.duration  histogram, s: how long leases were held,
//	                           until released or lost
//	dlock.fence.writes         counter {write}: writes checked by a guard
//	                           of package fence (given the Observer with
//	                           fence.WithObserver), by dlock.result:
//	                           accepted or stale
//
// They count what dlockprom's Collector counts, event for event; the two
// may observe the same clients together through dlock.Observers.
//
// # Cardinality
//
// Lock names become attribute values of spans and metrics. An Observer
// records the first DefaultMaxLockNames distinct names as they are and
// any later one as OtherName (see WithMaxLockNames), so that names that
// carry an id ("order:81723") cannot add series for ever; map such names
// to a bounded set with WithLockName, as dlockprom.WithLockLabel does.
package dlockotel
