package etcdlock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
)

// Defaults of the options.
const (
	// DefaultTTL is the lease time of a lock when WithTTL is not given.
	DefaultTTL = 30 * time.Second

	// MinTTL is the shortest TTL accepted.
	MinTTL = 10 * time.Millisecond

	// MaxTTL is the longest TTL accepted: a lease is renewed while held,
	// so a longer TTL would only keep the lock of a holder that died from
	// the next one for longer.
	MaxTTL = 24 * time.Hour
)

// DefaultRetry is how Lock waits before it asks again after a failed
// request or a broken watch (an election in the cluster, a lost
// connection), when WithRetry is not given: 10ms, doubling up to a second,
// without end; ctx bounds the wait.
var DefaultRetry = dlock.ExponentialBackoff(10*time.Millisecond, time.Second)

// An Option configures a lock.
type Option func(*config)

type config struct {
	ttl     time.Duration
	retry   dlock.RetryStrategy
	renew   bool
	maxHold time.Duration
}

func newConfig(opts []Option) config {
	cfg := config{ttl: DefaultTTL, retry: DefaultRetry, renew: true}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return cfg
}

// check reports a bad option, naming it.
func (cfg *config) check() error {
	if err := lease.CheckTTL("etcdlock", cfg.ttl, MinTTL, MaxTTL); err != nil {
		return err
	}
	if cfg.maxHold < 0 {
		return fmt.Errorf("etcdlock: WithMaxHold(%v) is negative; 0 means no cap", cfg.maxHold)
	}
	if err := dlock.CheckRetry(cfg.retry); err != nil {
		return fmt.Errorf("etcdlock: WithRetry: %w", err)
	}
	return nil
}

// WithTTL sets the lease time: how long a lease lasts after it was last
// confirmed. The default is DefaultTTL (30s). Each lease is an etcd lease
// of its own, granted for the TTL rounded up to whole seconds (etcd's
// unit; the cluster may raise it to its minimum, one and a half election
// timeouts); the lease's Until never counts on more than the TTL. It must
// be between MinTTL and MaxTTL.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithRetry sets how Lock waits before it asks again when a request fails
// or the watch on the key ahead breaks (an election, a lost connection, a
// compacted revision); see DefaultRetry. A wake-up by the watch needs no
// retry. dlock.NoRetry() makes Lock give up at the first such failure,
// and dlock.MaxAttempts bounds the failures it rides out.
func WithRetry(s dlock.RetryStrategy) Option { return func(c *config) { c.retry = s } }

// WithoutRenewal makes a fixed lease: it ends, with an error matching
// dlock.ErrExpired, one TTL after it was granted (or last refreshed), and
// its etcd lease is then revoked. Ownership is still confirmed in the
// background, so the lease also ends early if it cannot be confirmed.
// Renewal is on by default.
func WithoutRenewal() Option { return func(c *config) { c.renew = false } }

// WithMaxHold caps how long one lease can be held: the watchdog renews it
// until d after it was granted and no further, and the lease then ends,
// with an error matching dlock.ErrMaxHold and dlock.ErrLost, and its etcd
// lease is revoked. The default is 0: no cap.
func WithMaxHold(d time.Duration) Option { return func(c *config) { c.maxHold = d } }

// A ClientOption configures New.
type ClientOption func(*clientConfig)

type clientConfig struct {
	obs          dlock.Observer
	log          *slog.Logger
	strictServer bool
}

// WithObserver has every lock of the Client report its events to o (see
// dlock.Observer): the start, wait and outcome of each Lock and TryLock,
// and each lease's renewals, failed renewals, loss and release. o is
// called synchronously and must be quick. Package dlockprom turns the
// events into Prometheus metrics. The default is none; a nil o means
// none. It combines with WithLogger.
func WithObserver(o dlock.Observer) ClientOption { return func(c *clientConfig) { c.obs = o } }

// WithLogger has the Client log the events of every lock through
// dlock.LogObserver: losses at Warn, failed renewals and failed
// acquisitions with a hard error at Info, the rest at Debug. The default
// is none; a nil l means none. It combines with WithObserver.
func WithLogger(l *slog.Logger) ClientOption { return func(c *clientConfig) { c.log = l } }

// WithStrictServerVersion makes the Client refuse an etcd cluster with a
// member older than MinServerVersions: its first Lock or TryLock asks
// every endpoint of the clientv3.Client for its version (waiting through
// failed requests as WithRetry says), and every Lock and TryLock then
// fails with an error naming the version, if one is older. Without it the
// Client logs such a version once, at Warn (through WithLogger's logger,
// or slog.Default()), and goes on: its own renewals are safe on any
// server (see the package doc), but an older server can revoke a lease
// that its leader keeps alive. The default is off.
func WithStrictServerVersion() ClientOption { return func(c *clientConfig) { c.strictServer = true } }
