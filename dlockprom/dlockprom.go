package dlockprom

import (
	"errors"
	"strings"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
	"github.com/dlock-go/dlock/internal/vocab"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultWaitBuckets are the buckets of the wait histogram, in seconds,
// when WithWaitBuckets is not given: from 100µs, an uncontended
// acquisition on a local network, to 60s, a long queue.
var DefaultWaitBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// DefaultHoldBuckets are the buckets of the hold histogram, in seconds,
// when WithHoldBuckets is not given: from 1ms to an hour.
var DefaultHoldBuckets = []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}

// An Option configures a Collector.
type Option func(*config)

type config struct {
	namespace   string
	lockLabel   func(name string) string
	waitBuckets []float64
	holdBuckets []float64
}

// WithNamespace puts ns and an underscore before every metric name:
// WithNamespace("shop") gives shop_dlock_acquisitions_total. The default is
// none: dlock_acquisitions_total.
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithLockLabel sets the value of the lock label of a lock called name to
// f(name), to keep the number of series bounded when lock names carry ids:
// for instance, strip "order:1234" to "order". Locks mapped to one value
// share their series. The default, like a nil f, uses the name as it is.
func WithLockLabel(f func(name string) string) Option {
	return func(c *config) { c.lockLabel = f }
}

// WithWaitBuckets sets the buckets, in seconds, of the wait histogram. The
// default is DefaultWaitBuckets; nil means the default.
func WithWaitBuckets(b []float64) Option { return func(c *config) { c.waitBuckets = b } }

// WithHoldBuckets sets the buckets, in seconds, of the hold histogram. The
// default is DefaultHoldBuckets; nil means the default.
func WithHoldBuckets(b []float64) Option { return func(c *config) { c.holdBuckets = b } }

// A Collector turns lock events into Prometheus metrics. It is a
// dlock.Observer, to give to the clients whose locks it measures
// (redislock.WithObserver, redlock.WithObserver, zklock.WithObserver), and
// a prometheus.Collector, to register with a prometheus.Registerer. One
// Collector may observe any number of clients; it is safe for concurrent
// use.
type Collector struct {
	lockLabel func(string) string

	acquisitions *prometheus.CounterVec
	wait         *prometheus.HistogramVec
	holders      *prometheus.GaugeVec
	waiting      *prometheus.GaugeVec
	renewals     *prometheus.CounterVec
	losses       *prometheus.CounterVec
	hold         *prometheus.HistogramVec
	fenced       *prometheus.CounterVec
}

var (
	_ dlock.Observer       = (*Collector)(nil)
	_ prometheus.Collector = (*Collector)(nil)
)

// New returns a Collector configured by opts. Register it, and pass it to
// the clients whose locks it measures.
func New(opts ...Option) *Collector {
	cfg := config{waitBuckets: DefaultWaitBuckets, holdBuckets: DefaultHoldBuckets}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.waitBuckets == nil {
		cfg.waitBuckets = DefaultWaitBuckets
	}
	if cfg.holdBuckets == nil {
		cfg.holdBuckets = DefaultHoldBuckets
	}
	name := func(n string) string { return prometheus.BuildFQName(cfg.namespace, "dlock", n) }
	lk := []string{"lock", "kind"}
	return &Collector{
		lockLabel: cfg.lockLabel,
		acquisitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("acquisitions_total"),
			Help: "Lock and TryLock calls that ended, by result: acquired, not_obtained (the lock was taken, or the call gave up), or error."},
			[]string{"lock", "kind", "result"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name("wait_seconds"),
			Help:    "How long Lock and TryLock calls that acquired the lock took, waiting included.",
			Buckets: cfg.waitBuckets}, lk),
		holders: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name("holders"),
			Help: "Leases held now by the observed clients."}, lk),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name("waiting"),
			Help: "Lock calls of the observed clients waiting now for a lock held by another owner."}, lk),
		renewals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("renewals_total"),
			Help: "Lease renewals and confirmations (by the watchdog or Refresh), by result: ok or failed."},
			[]string{"lock", "kind", "result"}),
		losses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("losses_total"),
			Help: "Leases that ended other than by release, by cause: expired, taken_over, session_expired, closed or other."},
			[]string{"lock", "kind", "cause"}),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name("hold_seconds"),
			Help:    "How long leases were held, until released or lost.",
			Buckets: cfg.holdBuckets}, lk),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name("fenced_writes_total"),
			Help: "Writes checked by a guard of package fence, by result: accepted, or stale (refused: a later holder had written); lock is the resource, kind the guard."},
			[]string{"lock", "kind", "result"}),
	}
}

func (c *Collector) vecs() []prometheus.Collector {
	return []prometheus.Collector{c.acquisitions, c.wait, c.holders, c.waiting, c.renewals, c.losses, c.hold, c.fenced}
}

// Describe sends the descriptions of every metric; see prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.vecs() {
		v.Describe(ch)
	}
}

// Collect sends the current value of every metric; see prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, v := range c.vecs() {
		v.Collect(ch)
	}
}

// Observe records e; see dlock.Observer.
func (c *Collector) Observe(e dlock.Event) {
	lock := c.label(e.Name)
	e.Lock = strings.ToValidUTF8(vocab.Kind(e.Lock), "\uFFFD")
	switch e.Kind {
	case dlock.EventWaiting:
		c.waiting.WithLabelValues(lock, e.Lock).Inc()
	case dlock.EventAcquired:
		c.ended(lock, e, "acquired")
		c.wait.WithLabelValues(lock, e.Lock).Observe(e.Wait.Seconds())
		c.holders.WithLabelValues(lock, e.Lock).Inc()
	case dlock.EventNotAcquired:
		result := "error"
		if errors.Is(e.Err, dlock.ErrNotObtained) {
			result = "not_obtained"
		}
		c.ended(lock, e, result)
	case dlock.EventRenewed:
		c.renewals.WithLabelValues(lock, e.Lock, "ok").Inc()
	case dlock.EventRenewFailed:
		c.renewals.WithLabelValues(lock, e.Lock, "failed").Inc()
	case dlock.EventLost:
		c.losses.WithLabelValues(lock, e.Lock, Cause(e.Err)).Inc()
		c.released(lock, e)
	case dlock.EventReleased:
		c.released(lock, e)
	case dlock.EventFenceAccepted:
		c.fenced.WithLabelValues(lock, e.Lock, "accepted").Inc()
	case dlock.EventFenceRefused:
		c.fenced.WithLabelValues(lock, e.Lock, "stale").Inc()
	}
}

// ended records the end of an acquisition.
func (c *Collector) ended(lock string, e dlock.Event, result string) {
	c.acquisitions.WithLabelValues(lock, e.Lock, result).Inc()
	if e.Waited { // this call's EventWaiting raised the gauge
		c.waiting.WithLabelValues(lock, e.Lock).Dec()
	}
}

// released records the end of a lease.
func (c *Collector) released(lock string, e dlock.Event) {
	// The hold time first: a reader that sees the holders gauge fall sees
	// the hold that ended too.
	c.hold.WithLabelValues(lock, e.Lock).Observe(e.Held.Seconds())
	c.holders.WithLabelValues(lock, e.Lock).Dec()
}

// Forget deletes every series of the lock called name (after
// WithLockLabel's mapping), for a lock that will not be used again. A
// lease of it still held, or a call still waiting for it, makes the
// gauges go below zero when it ends: forget only locks that are done with.
func (c *Collector) Forget(name string) {
	l := prometheus.Labels{"lock": c.label(name)}
	c.acquisitions.DeletePartialMatch(l)
	c.wait.DeletePartialMatch(l)
	c.holders.DeletePartialMatch(l)
	c.waiting.DeletePartialMatch(l)
	c.renewals.DeletePartialMatch(l)
	c.losses.DeletePartialMatch(l)
	c.hold.DeletePartialMatch(l)
	c.fenced.DeletePartialMatch(l)
}

// Cause returns the cause label of a lease lost with err (the Err of an
// EventLost): "expired" (dlock.ErrExpired: no renewal got through before
// Until), "taken_over" (dlock.ErrTakenOver: the server says the lock is no
// longer the lease's), "session_expired" (zklock.ErrSessionExpired),
// "lease_not_found" (etcdlock.ErrLeaseNotFound: etcd no longer knows the
// lease's etcd lease), "closed" (dlock.ErrClosed, every backend's
// ErrClosed: the client was closed and could not release the lease), or
// "other".
func Cause(err error) string { return lease.Cause(err) }

// label returns the lock label of a lock name: WithLockLabel's mapping,
// made valid UTF-8 (Prometheus panics on a label value that is not, and an
// observer must never panic in the middle of a Lock).
func (c *Collector) label(name string) string {
	if c.lockLabel != nil {
		name = c.lockLabel(name)
	}
	return strings.ToValidUTF8(name, "\uFFFD")
}
