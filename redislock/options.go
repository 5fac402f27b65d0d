package redislock

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
)

// Defaults for the options of every lock kind.
const (
	DefaultTTL = 30 * time.Second
	// MinTTL is the shortest TTL accepted: below it, the drift allowance and
	// one round trip eat the whole lease.
	MinTTL = 10 * time.Millisecond
	// MaxTTL is the longest TTL accepted: a lease is renewed while held,
	// so a longer TTL would only keep the lock of a holder that died from
	// the next one for longer.
	MaxTTL = 24 * time.Hour
)

// DefaultRetry is the retry strategy of Lock when WithRetry is not given:
// a waiter is woken at once by a release notice, and polls with
// exponential backoff and full jitter, between 8ms and 512ms, in case a
// notice is missed.
var DefaultRetry = dlock.ExponentialBackoff(8*time.Millisecond, 512*time.Millisecond)

// bareRetry is the retry strategy of a Mutex made WithBareKey when
// WithRetry is not given: the other libraries' releases send no notice,
// so a waiter polls, between 8ms and 64ms apart.
var bareRetry = dlock.ExponentialBackoff(8*time.Millisecond, 64*time.Millisecond)

// A ClientOption configures a Client.
type ClientOption func(*clientConfig)

type clientConfig struct {
	obs dlock.Observer
	log *slog.Logger
}

func newClientConfig(opts []ClientOption) clientConfig {
	var c clientConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// WithObserver has every lock of the Client report its events to o (see
// dlock.Observer): the start, wait and outcome of each Lock and TryLock,
// and each lease's renewals, failed renewals, loss and release. o is
// called synchronously, on the caller's goroutine or the watchdog's, and
// must be quick. Package dlockprom turns the events into Prometheus
// metrics. The default is none; a nil o means none. It combines with
// WithLogger.
func WithObserver(o dlock.Observer) ClientOption {
	return func(c *clientConfig) { c.obs = o }
}

// WithLogger has every lock of the Client log its events to l, through
// dlock.LogObserver: losses at Warn, failed renewals and failed
// acquisitions with a hard error at Info, the rest at Debug. The default is
// none; a nil l means none. It combines with WithObserver.
func WithLogger(l *slog.Logger) ClientOption {
	return func(c *clientConfig) { c.log = l }
}

// An Option configures a lock.
type Option func(*config)

type config struct {
	ttl     time.Duration
	renew   bool
	retry   dlock.RetryStrategy
	maxHold time.Duration

	replicas       int
	replicaTimeout time.Duration

	bare     bool // WithBareKey
	retrySet bool // WithRetry was given
}

func newConfig(opts []Option) config {
	c := config{ttl: DefaultTTL, renew: true, retry: DefaultRetry}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.bare && !c.retrySet {
		c.retry = bareRetry
	}
	return c
}

// noBareKey returns the error of a lock kind that cannot use the bare-key
// layout when WithBareKey was given, else nil.
func (c config) noBareKey(kind string) error {
	if !c.bare {
		return nil
	}
	article := "a"
	if strings.ContainsRune("AEIOUaeiou", rune(kind[0])) || strings.HasPrefix(kind, "RW") {
		article = "an"
	}
	return fmt.Errorf("redislock: WithBareKey: %s %s cannot use the bare-key layout, which only a single-key exclusive lock has; use NewMutex (or NewStriped): %w", article, kind, ErrBareKeyUnsupported)
}

func (c config) check() error {
	if err := lease.CheckTTL("redislock", c.ttl, MinTTL, MaxTTL); err != nil {
		return err
	}
	if c.replicas < 0 || c.replicas > 0 && (c.replicaTimeout <= 0 || c.replicaTimeout >= c.ttl) {
		return fmt.Errorf("redislock: WithReplicas(%d, %v): want n >= 1 and a timeout between 0 and the TTL %v", c.replicas, c.replicaTimeout, c.ttl)
	}
	if c.maxHold < 0 {
		return fmt.Errorf("redislock: WithMaxHold(%v): want a positive duration, or 0 for no cap", c.maxHold)
	}
	return dlock.CheckRetry(c.retry)
}

// WithTTL sets the lease time: how long the lock outlives a holder that
// stops renewing it, because it crashed, paused or lost its network. The
// default is DefaultTTL (30s); it must be between MinTTL and MaxTTL. With
// renewal on, a lease is renewed every TTL/3.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithoutRenewal makes a fixed lease: it is never renewed by the watchdog
// and ends, with an error matching dlock.ErrExpired, when its TTL runs out,
// unless the holder calls Refresh. Renewal is on by default.
func WithoutRenewal() Option { return func(c *config) { c.renew = false } }

// WithMaxHold caps how long one lease of the lock can be held: the
// watchdog renews it until d after it was granted and no further, and the
// lease then ends, with an error matching dlock.ErrMaxHold and
// dlock.ErrLost, and gives the lock back on the server. Until never passes
// the cap, so Done closes by then. It keeps a holder stuck in a loop from
// holding the lock for ever. The default is 0: no cap.
func WithMaxHold(d time.Duration) Option { return func(c *config) { c.maxHold = d } }

// WithRetry sets how Lock waits between attempts when a release notice does
// not arrive; see DefaultRetry. dlock.NoRetry() makes Lock a single attempt,
// and dlock.MaxAttempts bounds the attempts.
func WithRetry(s dlock.RetryStrategy) Option {
	return func(c *config) { c.retry, c.retrySet = s, true }
}

// WithBareKey makes a Mutex lock the key named by the Mutex's name itself,
// in the layout that bsm/redislock, redsync, redis-py's Lock and
// node-redlock use: SET name token NX PX ttl, released by deleting it only
// if it still holds the token, refreshed by extending it only then. A
// Mutex made with it excludes those libraries' locks on the same key, in
// both directions (see docs/interop-redis.md), and keeps dlock's fence,
// watchdog, Until and Done. The key is the whole name, as the other
// library spells it ("orders:42", "{user}:7"): dlock adds no prefix, and
// reads a {hash tag} in it as Redis Cluster does. Fences come from the
// counter of the key's Cluster slot under dlock:fence:, which the other
// libraries neither read nor write.
//
// The other libraries' releases send no notice, so a waiting Lock polls:
// by default between 8ms and 64ms apart (WithRetry replaces this), and a
// dlock release still wakes dlock's waiters at once. Every party to the
// key must use the layout: a Mutex with it and one without it on the same
// name do not exclude each other. Only NewMutex and NewStriped (whose
// stripes are mutexes on the keys name:0 ... name:n-1) support it; the
// other kinds and NewElection report an error matching
// ErrBareKeyUnsupported from every call. A name that is empty, not UTF-8,
// longer than 4096 bytes or starts with "dlock:" is refused. Inspect and
// ForceUnlock read dlock's own layout, not bare keys. The default is
// dlock's layout, the key dlock:{name}.
func WithBareKey() Option { return func(c *config) { c.bare = true } }

// WithReplicas makes an acquire count only once at least n replicas have
// acknowledged it: the acquire is followed, on the same connection, by
// WAIT n timeout, and a lock that reached fewer replicas within timeout is
// released and not obtained (TryLock returns an error matching
// dlock.ErrNotObtained that says so; Lock retries).
//
// It closes most of the failover hole of a replicated deployment (master
// with replicas behind Sentinel): without it, a master that dies before
// replicating a fresh lock leaves a promoted replica that grants the same
// lock again. It costs the replication delay on every acquire, and makes
// locking fail while fewer than n replicas are up. Renewals are not waited
// for. The default is 0: no WAIT.
func WithReplicas(n int, timeout time.Duration) Option {
	return func(c *config) { c.replicas, c.replicaTimeout = n, timeout }
}

// ttlMillis returns ttl in whole milliseconds, rounded up, so that the
// server never holds the key for less than ttl.
func ttlMillis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}
