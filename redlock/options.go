package redlock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
)

// Defaults, listed in one place.
const (
	DefaultTTL         = 30 * time.Second
	DefaultNodeTimeout = 50 * time.Millisecond
	// DefaultRestartWindow is the restart window when WithRestartWindow is
	// not given: the DefaultTTL.
	DefaultRestartWindow = DefaultTTL
	// MinTTL is the shortest TTL accepted by any lock.
	MinTTL = 10 * time.Millisecond
	// MaxTTL is the longest TTL accepted: a lease is renewed while held,
	// so a longer TTL would only keep the lock of a holder that died from
	// the next one for longer.
	MaxTTL = 24 * time.Hour
)

// DefaultRetry is how Lock waits between attempts when WithRetry is not
// given: exponential backoff with full jitter between 10ms and 500ms, so
// that clients that collided do not collide again.
var DefaultRetry = dlock.ExponentialBackoff(10*time.Millisecond, 500*time.Millisecond)

// bareRetry is how a Mutex made WithBareKey waits when WithRetry is not
// given: between 8ms and 64ms, so that it notices another library's
// release soon.
var bareRetry = dlock.ExponentialBackoff(8*time.Millisecond, 64*time.Millisecond)

// A ClientOption configures a Client.
type ClientOption func(*clientConfig)

type clientConfig struct {
	nodeTimeout   time.Duration
	restartWindow time.Duration
	detectRestart bool
	obs           dlock.Observer
	log           *slog.Logger
}

// WithNodeTimeout sets how long one operation waits for one node. It should
// be far below the TTL, so that a dead node costs little of the validity.
// It must also hold a new connection's set-up: with TLS and a password, a
// handshake and a login, which on a loaded host can take longer than 50ms
// (the chaos harness saw no grant at all, every reconnection cut off
// mid-handshake, until the timeout was raised; docs/SAFETY.md). The
// default is DefaultNodeTimeout (50ms); it must be positive.
func WithNodeTimeout(d time.Duration) ClientOption {
	return func(c *clientConfig) { c.nodeTimeout = d }
}

// WithRestartWindow sets the restart window of the deployment: how long a
// node whose server restarted (or that this Client saw lose its data) is
// kept from voting, so that no lease it had granted before can still be
// valid; see the package documentation. It is a property of the nodes, not
// of one lock: every Client of the same nodes must use the same window, and
// a Client refuses a lock whose TTL is longer (WithTTL) with an error
// naming this option. It must also exceed the disagreement between the
// nodes' clocks by more than 100ms, for fences to keep increasing when a
// node loses its data. The default is DefaultRestartWindow (30s); it must
// be positive.
func WithRestartWindow(d time.Duration) ClientOption {
	return func(c *clientConfig) { c.restartWindow = d }
}

// WithoutRestartDetection lets nodes vote as soon as they answer, even right
// after a restart that lost their data. That is unsafe: a restarted node can
// then vote for a second holder while the first one's lease is still valid,
// and its fence counter can go back. It exists for benchmarks. Nodes that
// persist every write (appendonly yes, appendfsync always) need not turn
// detection off: a Client that can read their configuration (CONFIG GET)
// lets them vote at once after a restart.
func WithoutRestartDetection() ClientOption {
	return func(c *clientConfig) { c.detectRestart = false }
}

// WithObserver has every lock of the Client report its events to o (see
// dlock.Observer): the start, wait and outcome of each Lock and TryLock,
// and each lease's renewals, failed renewals (no majority extended it),
// loss and release. o is called synchronously, on the caller's goroutine
// or the watchdog's, and must be quick. Package dlockprom turns the events
// into Prometheus metrics. The default is none; a nil o means none. It
// combines with WithLogger.
func WithObserver(o dlock.Observer) ClientOption {
	return func(c *clientConfig) { c.obs = o }
}

// WithLogger has every lock of the Client log its events to l, through
// dlock.LogObserver: losses at Warn, failed renewals and failed
// acquisitions with a hard error at Info, the rest at Debug. It also logs,
// once per node, what the Client learns about the nodes' configuration:
// at Info that a node refused CONFIG GET, at Warn that a node may evict
// lock keys (maxmemory with a maxmemory-policy other than noeviction).
// The default is none, except that warnings then go to slog.Default(); a
// nil l means the default. It combines with WithObserver.
func WithLogger(l *slog.Logger) ClientOption {
	return func(c *clientConfig) { c.log = l }
}

func newClientConfig(opts []ClientOption) clientConfig {
	c := clientConfig{nodeTimeout: DefaultNodeTimeout, restartWindow: DefaultRestartWindow, detectRestart: true}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// An Option configures a Mutex.
type Option func(*config)

type config struct {
	ttl     time.Duration
	renew   bool
	retry   dlock.RetryStrategy
	maxHold time.Duration

	bare     bool // WithBareKey
	retrySet bool // WithRetry was given
}

// WithTTL sets the lease time; the default is DefaultTTL (30s). It must
// be between MinTTL and MaxTTL, leave room for the node timeout and the
// clock-drift allowance (1% of the TTL plus 2ms), and be no longer than
// the Client's restart window (WithRestartWindow).
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.ttl = ttl } }

// WithoutRenewal makes a fixed lease that the watchdog does not extend.
func WithoutRenewal() Option { return func(c *config) { c.renew = false } }

// WithMaxHold caps how long one lease can be held: the watchdog extends it
// until d after it was granted and no further, and the lease then ends,
// with an error matching dlock.ErrMaxHold and dlock.ErrLost, and deletes
// its key from the nodes. Until never passes the cap, so Done closes by
// then. The default is 0: no cap.
func WithMaxHold(d time.Duration) Option { return func(c *config) { c.maxHold = d } }

// WithRetry sets how Lock waits between attempts; see DefaultRetry.
func WithRetry(s dlock.RetryStrategy) Option {
	return func(c *config) { c.retry, c.retrySet = s, true }
}

// WithBareKey makes a Mutex lock, on every node, the key named by the
// Mutex's name itself, in the layout that redsync's Redlock (and
// node-redlock) use over the same masters: SET name token NX PX ttl,
// released by deleting it only if it still holds the token, extended by
// extending it only then. A Mutex made with it and a redsync Mutex on the
// same key and nodes exclude each other (see docs/interop-redis.md), and
// the Mutex keeps dlock's fence (drawn from the counter of the key's slot
// under dlock:fence:, beside the key), restart detection, watchdog, Until
// and Done. dlock adds no prefix to the key. The other libraries' releases
// send no notice: a waiting Lock polls, by default between 8ms and 64ms
// apart (WithRetry replaces this). Every party to the key must use the
// layout: a Mutex with it and one without it on the same name do not
// exclude each other. NewElection refuses it with an error matching
// ErrBareKeyUnsupported. A name that is empty, not UTF-8, longer than 4096
// bytes or starts with "dlock:" is refused. Inspect and ForceUnlock read
// dlock's own layout, not bare keys. The default is dlock's layout, the
// key dlock:{name}.
func WithBareKey() Option { return func(c *config) { c.bare = true } }

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

func (c config) check(cc clientConfig) error {
	if err := lease.CheckTTL("redlock", c.ttl, MinTTL, MaxTTL); err != nil {
		return err
	}
	if drift(c.ttl)+cc.nodeTimeout >= c.ttl {
		return fmt.Errorf("redlock: TTL %v leaves no validity after the drift allowance (%v) and the node timeout (%v); raise WithTTL or lower WithNodeTimeout",
			c.ttl, drift(c.ttl), cc.nodeTimeout)
	}
	if cc.detectRestart && c.ttl > cc.restartWindow {
		return fmt.Errorf("redlock: TTL %v is longer than the Client's restart window %v: a node that restarted could vote for a second holder while a lease it had granted is still valid; give every Client of these nodes WithRestartWindow(%v) or more, or use a shorter TTL",
			c.ttl, cc.restartWindow, c.ttl)
	}
	if c.maxHold < 0 {
		return fmt.Errorf("redlock: WithMaxHold(%v): want a positive duration, or 0 for no cap", c.maxHold)
	}
	return dlock.CheckRetry(c.retry)
}

// drift is the clock-drift allowance of the Redlock algorithm.
var drift = lease.Drift

func ttlMillis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}
