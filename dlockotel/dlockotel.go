package dlockotel

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/vocab"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the Observer's tracer and meter.
const ScopeName = "github.com/dlock-go/dlock/dlockotel"

// OtherName is the dlock.lock.name of every lock past the first
// WithMaxLockNames distinct names.
const OtherName = "_other"

// DefaultMaxLockNames is the number of distinct lock names an Observer
// records when WithMaxLockNames is not given.
const DefaultMaxLockNames = 100

// DefaultWaitBuckets are the bucket boundaries, in seconds, of the
// dlock.lock.wait.duration histogram: dlockprom's, from 100µs to 60s.
var DefaultWaitBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// DefaultHoldBuckets are the bucket boundaries, in seconds, of the
// dlock.lease.hold.duration histogram: dlockprom's, from 1ms to an hour.
var DefaultHoldBuckets = []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}

// The attribute keys of spans and metrics.
const (
	AttrBackend = attribute.Key("dlock.backend")   // "redislock", "pglock", ...
	AttrName    = attribute.Key("dlock.lock.name") // the lock's name, bounded
	AttrKind    = attribute.Key("dlock.lock.kind") // "mutex", "read", "write", ... as dlock run --kind says
	AttrOutcome = attribute.Key("dlock.outcome")   // of a dlock.lock span
	AttrFence   = attribute.Key("dlock.fence")     // a lease's fence
	AttrWaited  = attribute.Key("dlock.waited")    // a Lock call found the lock taken
	AttrResult  = attribute.Key("dlock.result")    // of a counted call, renewal or write
	AttrCause   = attribute.Key("dlock.cause")     // why a lease was lost
	AttrHeld    = attribute.Key("dlock.held")      // seconds a lease was held
)

// An Option configures an Observer.
type Option func(*config)

type config struct {
	tp          trace.TracerProvider
	mp          metric.MeterProvider
	lockName    func(string) string
	maxNames    int
	waitBuckets []float64
	holdBuckets []float64
}

// WithTracerProvider sets the provider of the Observer's tracer. The
// default, like nil, is otel.GetTracerProvider() at the time of New.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider sets the provider of the Observer's meter. The
// default, like nil, is otel.GetMeterProvider() at the time of New.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithLockName sets the dlock.lock.name of a lock called name to
// f(name), to keep the number of series bounded when lock names carry ids:
// for instance, strip "order:1234" to "order". Locks mapped to one value
// share their series. The default, like a nil f, uses the name as it is.
// It is dlockprom.WithLockLabel's counterpart.
func WithLockName(f func(name string) string) Option {
	return func(c *config) { c.lockName = f }
}

// WithMaxLockNames bounds the number of distinct dlock.lock.name values
// (after WithLockName's mapping) at n: once n have been seen, any other
// name is recorded as OtherName, in spans and metrics alike. The default
// is DefaultMaxLockNames; zero means the default and a negative n no
// bound.
func WithMaxLockNames(n int) Option { return func(c *config) { c.maxNames = n } }

// WithWaitBuckets sets the bucket boundaries, in seconds, of the wait
// histogram. The default, like nil, is DefaultWaitBuckets.
func WithWaitBuckets(b []float64) Option { return func(c *config) { c.waitBuckets = b } }

// WithHoldBuckets sets the bucket boundaries, in seconds, of the hold
// histogram. The default, like nil, is DefaultHoldBuckets.
func WithHoldBuckets(b []float64) Option { return func(c *config) { c.holdBuckets = b } }

// An Observer turns lock events into OpenTelemetry spans and metrics. It
// is a dlock.ContextObserver, to give to the clients whose locks it
// observes (redislock.WithObserver, pglock.WithObserver, ...). One
// Observer may observe any number of clients; it is safe for concurrent
// use.
type Observer struct {
	tracer   trace.Tracer
	lockName func(string) string
	maxNames int

	acquisitions metric.Int64Counter
	wait         metric.Float64Histogram
	held         metric.Int64UpDownCounter
	waiting      metric.Int64UpDownCounter
	renewals     metric.Int64Counter
	lost         metric.Int64Counter
	hold         metric.Float64Histogram
	fenced       metric.Int64Counter

	mu     sync.Mutex
	names  map[string]struct{}      // the names recorded as themselves
	leases map[leaseKey][]openLease // the spans of leases held now
}

var _ dlock.ContextObserver = (*Observer)(nil)

// leaseKey identifies a lease among those held now, as well as its events
// allow: two leases of one key are told apart by their start.
type leaseKey struct {
	backend, name, kind string
	fence               uint64
	parent              trace.SpanID
}

type openLease struct {
	span  trace.Span
	start time.Time
}

// New returns an Observer configured by opts, to pass to the clients whose
// locks it observes. Its instruments are made at once; if the meter
// refuses one, the error goes to otel.Handle and that instrument records
// nothing.
func New(opts ...Option) *Observer {
	cfg := config{}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.maxNames == 0 {
		cfg.maxNames = DefaultMaxLockNames
	}
	if cfg.waitBuckets == nil {
		cfg.waitBuckets = DefaultWaitBuckets
	}
	if cfg.holdBuckets == nil {
		cfg.holdBuckets = DefaultHoldBuckets
	}
	m := cfg.mp.Meter(ScopeName)
	o := &Observer{
		tracer:   cfg.tp.Tracer(ScopeName),
		lockName: cfg.lockName,
		maxNames: cfg.maxNames,
		names:    map[string]struct{}{},
		leases:   map[leaseKey][]openLease{},
	}
	var errs []error
	check := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	o.acquisitions, err = m.Int64Counter("dlock.lock.acquisitions", metric.WithUnit("{call}"),
		metric.WithDescription("Lock and TryLock calls that ended, by dlock.result: acquired, not_obtained (the lock was taken, or the call gave up), or error."))
	check(err)
	o.wait, err = m.Float64Histogram("dlock.lock.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("How long Lock and TryLock calls that acquired the lock took, waiting included."),
		metric.WithExplicitBucketBoundaries(cfg.waitBuckets...))
	check(err)
	o.held, err = m.Int64UpDownCounter("dlock.leases.held", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases held now by the observed clients."))
	check(err)
	o.waiting, err = m.Int64UpDownCounter("dlock.lock.waiting", metric.WithUnit("{call}"),
		metric.WithDescription("Lock calls of the observed clients waiting now for a lock held by another owner."))
	check(err)
	o.renewals, err = m.Int64Counter("dlock.lease.renewals", metric.WithUnit("{renewal}"),
		metric.WithDescription("Lease renewals and confirmations (by the watchdog or Refresh), by dlock.result: ok or failed."))
	check(err)
	o.lost, err = m.Int64Counter("dlock.lease.lost", metric.WithUnit("{lease}"),
		metric.WithDescription("Leases that ended other than by release, by dlock.cause: expired, taken_over, session_expired, lease_not_found, closed or other."))
	check(err)
	o.hold, err = m.Float64Histogram("dlock.lease.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("How long leases were held, until released or lost."),
		metric.WithExplicitBucketBoundaries(cfg.holdBuckets...))
	check(err)
	o.fenced, err = m.Int64Counter("dlock.fence.writes", metric.WithUnit("{write}"),
		metric.WithDescription("Writes checked by a guard of package fence, by dlock.result: accepted, or stale; dlock.lock.name is the resource, dlock.lock.kind the guard."))
	check(err)
	if len(errs) > 0 {
		otel.Handle(errors.Join(errs...))
	}
	return o
}

// Observe records e with no context: its spans have no parent. Backends
// call ObserveContext instead.
func (o *Observer) Observe(e dlock.Event) { o.ObserveContext(context.Background(), e) }

// ObserveContext records e; see dlock.ContextObserver. The spans of a
// Lock or TryLock call and of its lease are children of the span in ctx.
func (o *Observer) ObserveContext(ctx context.Context, e dlock.Event) {
	if ctx == nil {
		ctx = context.Background()
	}
	name := o.name(e.Name)
	e.Lock = strings.ToValidUTF8(vocab.Kind(e.Lock), "\uFFFD")
	attrs := []attribute.KeyValue{AttrName.String(name), AttrKind.String(e.Lock)}
	if e.Backend != "" {
		attrs = append(attrs, AttrBackend.String(e.Backend))
	}
	set := metric.WithAttributes(attrs...)
	with := func(kv attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributes(append(attrs[:len(attrs):len(attrs)], kv)...)
	}
	switch e.Kind {
	case dlock.EventWaiting:
		o.waiting.Add(ctx, 1, set)
	case dlock.EventAcquired:
		o.acquisitions.Add(ctx, 1, with(AttrResult.String("acquired")))
		o.wait.Record(ctx, e.Wait.Seconds(), set)
		o.held.Add(ctx, 1, set)
		o.ended(ctx, e, set)
		o.acquired(ctx, e, attrs)
	case dlock.EventNotAcquired:
		result := "error"
		if errors.Is(e.Err, dlock.ErrNotObtained) {
			result = "not_obtained"
		}
		o.acquisitions.Add(ctx, 1, with(AttrResult.String(result)))
		o.ended(ctx, e, set)
		o.notAcquired(ctx, e, attrs)
	case dlock.EventRenewed:
		o.renewals.Add(ctx, 1, with(AttrResult.String("ok")))
		o.leaseEvent(ctx, e, "renewed", false)
	case dlock.EventRenewFailed:
		o.renewals.Add(ctx, 1, with(AttrResult.String("failed")))
		o.leaseEvent(ctx, e, "renew_failed", false)
	case dlock.EventLost:
		o.lost.Add(ctx, 1, with(AttrCause.String(Cause(e.Err))))
		o.hold.Record(ctx, e.Held.Seconds(), set)
		o.held.Add(ctx, -1, set)
		o.leaseEvent(ctx, e, "lost", true)
	case dlock.EventReleased:
		o.hold.Record(ctx, e.Held.Seconds(), set)
		o.held.Add(ctx, -1, set)
		o.leaseEvent(ctx, e, "released", true)
	case dlock.EventFenceAccepted:
		o.fenced.Add(ctx, 1, with(AttrResult.String("accepted")))
	case dlock.EventFenceRefused:
		o.fenced.Add(ctx, 1, with(AttrResult.String("stale")))
	}
}

// ended records the end of an acquisition in the waiting count.
func (o *Observer) ended(ctx context.Context, e dlock.Event, set metric.MeasurementOption) {
	if e.Waited { // this call's EventWaiting raised it
		o.waiting.Add(ctx, -1, set)
	}
}

// Outcome returns the dlock.outcome of a dlock.lock span of a call that
// ended with err (the Err of an EventNotAcquired; nil for one that
// obtained the lock): "granted", "cancelled" (ctx ended first),
// "unavailable" (dlock.ErrUnavailable: the service could not be reached),
// "not_obtained" (the lock was taken, or the retry strategy gave up), or
// "error".
func Outcome(err error) string {
	switch {
	case err == nil:
		return "granted"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	case errors.Is(err, dlock.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, dlock.ErrNotObtained):
		return "not_obtained"
	}
	return "error"
}

// Cause returns the dlock.cause of a lease lost with err (the Err of an
// EventLost): the same words as dlockprom.Cause.
func Cause(err error) string { return lease.Cause(err) }

// lockSpan makes the dlock.lock span of a call that ended now, e.Wait
// after it began.
func (o *Observer) lockSpan(ctx context.Context, e dlock.Event, attrs []attribute.KeyValue, outcome string) (trace.Span, time.Time) {
	end := time.Now()
	_, span := o.tracer.Start(ctx, "dlock.lock",
		trace.WithTimestamp(end.Add(-e.Wait)),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...),
		trace.WithAttributes(AttrOutcome.String(outcome), AttrWaited.Bool(e.Waited)))
	return span, end
}

// acquired makes the dlock.lock span of a call that obtained a lease, and
// starts the dlock.lease span of the lease.
func (o *Observer) acquired(ctx context.Context, e dlock.Event, attrs []attribute.KeyValue) {
	fence := AttrFence.Int64(int64(e.Fence))
	span, now := o.lockSpan(ctx, e, attrs, "granted")
	if !span.IsRecording() {
		span.End(trace.WithTimestamp(now))
		return
	}
	span.SetAttributes(fence)
	span.End(trace.WithTimestamp(now))

	_, ls := o.tracer.Start(ctx, "dlock.lease",
		trace.WithTimestamp(now),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...),
		trace.WithAttributes(fence),
		trace.WithLinks(trace.Link{SpanContext: span.SpanContext()}))
	ls.AddEvent("granted", trace.WithTimestamp(now), trace.WithAttributes(fence))
	k := o.key(ctx, e)
	o.mu.Lock()
	o.leases[k] = append(o.leases[k], openLease{span: ls, start: now})
	o.mu.Unlock()
}

// notAcquired makes the dlock.lock span of a call that obtained nothing.
func (o *Observer) notAcquired(ctx context.Context, e dlock.Event, attrs []attribute.KeyValue) {
	outcome := Outcome(e.Err)
	span, now := o.lockSpan(ctx, e, attrs, outcome)
	if outcome == "error" || outcome == "unavailable" {
		span.RecordError(e.Err, trace.WithTimestamp(now))
		span.SetStatus(codes.Error, e.Err.Error())
	}
	span.End(trace.WithTimestamp(now))
}

// leaseEvent adds an event called name to the span of e's lease, and ends
// the span if end is set. A lease acquired before the Observer saw it, or
// with no recording span, has none.
func (o *Observer) leaseEvent(ctx context.Context, e dlock.Event, name string, end bool) {
	k := o.key(ctx, e)
	now := time.Now()
	o.mu.Lock()
	list := o.leases[k]
	if len(list) == 0 {
		// A backend whose lease events come with another context than
		// its call's: any parent will do.
		want := k
		want.parent = trace.SpanID{}
		for k2, l := range o.leases {
			if p := k2; func() bool { p.parent = trace.SpanID{}; return p == want }() {
				k, list = k2, l
				break
			}
		}
	}
	if len(list) == 0 {
		o.mu.Unlock()
		return
	}
	i := 0
	if end && len(list) > 1 { // the one whose start is nearest to now - Held
		began, best := now.Add(-e.Held), time.Duration(-1)
		for j, l := range list {
			d := l.start.Sub(began)
			if d < 0 {
				d = -d
			}
			if best < 0 || d < best {
				i, best = j, d
			}
		}
	}
	span := list[i].span
	if end {
		list = append(list[:i:i], list[i+1:]...)
		if len(list) == 0 {
			delete(o.leases, k)
		} else {
			o.leases[k] = list
		}
	}
	o.mu.Unlock()

	attrs := []attribute.KeyValue{AttrFence.Int64(int64(e.Fence))}
	if end {
		attrs = append(attrs, AttrHeld.Float64(e.Held.Seconds()))
	}
	if e.Kind == dlock.EventLost {
		attrs = append(attrs, AttrCause.String(Cause(e.Err)))
	}
	if e.Err != nil {
		attrs = append(attrs, attribute.String("error.message", e.Err.Error()))
	}
	span.AddEvent(name, trace.WithTimestamp(now), trace.WithAttributes(attrs...))
	if e.Kind == dlock.EventLost {
		span.SetStatus(codes.Error, e.Err.Error())
	}
	if end {
		span.End(trace.WithTimestamp(now))
	}
}

// key returns the key of e's lease among the open ones.
func (o *Observer) key(ctx context.Context, e dlock.Event) leaseKey {
	return leaseKey{backend: e.Backend, name: e.Name, kind: e.Lock, fence: e.Fence,
		parent: trace.SpanContextFromContext(ctx).SpanID()}
}

// name returns the dlock.lock.name of a lock called name: WithLockName's
// mapping, made valid UTF-8, and OtherName past WithMaxLockNames.
func (o *Observer) name(name string) string {
	if o.lockName != nil {
		name = o.lockName(name)
	}
	name = strings.ToValidUTF8(name, "\uFFFD")
	if o.maxNames < 0 {
		return name
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.names[name]; ok {
		return name
	}
	if len(o.names) >= o.maxNames {
		return OtherName
	}
	o.names[name] = struct{}{}
	return name
}
