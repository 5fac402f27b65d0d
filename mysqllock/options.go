package mysqllock

import (
	"log/slog"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/dblease"
)

// Defaults of the options.
const (
	// DefaultTable is the table of a Client given no WithTable.
	DefaultTable = "dlock_leases"

	// DefaultTTL is the lease time of a lock given no WithTTL.
	DefaultTTL = 30 * time.Second

	// MinTTL is the shortest TTL accepted: below it, the drift allowance and
	// one round trip eat the whole lease.
	MinTTL = 10 * time.Millisecond

	// MaxTTL is the longest TTL accepted.
	MaxTTL = 24 * time.Hour
)

// DefaultRetry is the retry strategy of Lock when WithRetry is not given:
// exponential backoff with full jitter, between 2ms and 64ms. MySQL has no
// LISTEN/NOTIFY, so a lease-mode waiter polls at that pace, and sees a
// release by another Client within 64ms; a session-mode waiter spends
// each backoff in GET_LOCK on the server, which a session holder's release
// ends at once. A release by the same Client wakes its waiters at once,
// and a holder's expiry wakes them when it is due. Lock backs off so too
// between attempts that find the database unavailable (see Faults in the
// package doc).
var DefaultRetry = dlock.ExponentialBackoff(2*time.Millisecond, 64*time.Millisecond)

// A ClientOption configures a Client.
type ClientOption func(*clientConfig)

type clientConfig = dblease.ClientConfig

// WithTable sets the table that holds the locks' rows, of both modes:
// "name" or "database.name", letters, digits and underscores, used as
// given (quoted with backticks). The default is DefaultTable
// ("dlock_leases"). Clients that are to exclude each other must use the
// same table.
func WithTable(name string) ClientOption { return func(c *clientConfig) { c.Table = name } }

// WithRestartWindow sets the restart window: how long a database server
// that started, or whose identity changed, grants no lock, so that no
// lease granted before, which a restore or a failover may have lost, can
// still be valid (see Restarts, failovers and restores in the package
// doc). It is a property of the database, not of one lock: every Client of
// the same database must use the same window, and a Client refuses a lock
// whose TTL is longer (WithTTL) with an error naming this option. Without
// it, a server that restarts keeps what it committed and grants at once,
// and one whose identity changed (@@server_id, @@hostname, @@port) grants
// no lock for the lock's TTL; with it, the server also grants nothing for
// d after it started (by its Uptime), and nothing for d after its identity
// changed. d must be positive.
func WithRestartWindow(d time.Duration) ClientOption { return dblease.WithRestartWindow(d) }

// WithoutRestartDetection lets the server grant at once after a failover
// or a restore, which may have lost leases still valid: a second holder
// can then be granted a lock while the first one's lease is valid (its
// fence is higher all the same). It exists for deployments whose copies
// never lag (synchronous replication, shared storage), and for
// benchmarks. It overrides WithRestartWindow.
func WithoutRestartDetection() ClientOption { return func(c *clientConfig) { c.Restart.Off = true } }

// WithObserver has every lock of the Client report its events to o (see
// dlock.Observer): the start, wait and outcome of each Lock and TryLock,
// and each lease's renewals, failed renewals, loss and release. o is
// called synchronously, on the caller's goroutine or the watchdog's, and
// must be quick. Package dlockprom turns the events into Prometheus
// metrics. The default is none; a nil o means none. It combines with
// WithLogger.
func WithObserver(o dlock.Observer) ClientOption { return func(c *clientConfig) { c.Obs = o } }

// WithLogger has every lock of the Client log its events to l, through
// dlock.LogObserver: losses at Warn, failed renewals and failed
// acquisitions with a hard error at Info, the rest at Debug. The default is
// none; a nil l means none. It combines with WithObserver.
func WithLogger(l *slog.Logger) ClientOption { return func(c *clientConfig) { c.Log = l } }

// An Option configures a lock, of either mode.
type Option func(*config)

type config = dblease.Config

// waitTimeout returns the wait_timeout, in whole seconds, that a
// session-mode lease of options c sets on its connection: the TTL
// rounded up, and at least 1, MySQL's smallest.
func waitTimeout(c config) int64 {
	return max(dblease.Units(c.TTL, time.Second), 1)
}

// checkEvery returns how often a session-mode lease of options c checks
// that its connection is alive: a tenth of the TTL, between 20ms and one
// second.
func checkEvery(c config) time.Duration {
	return min(max(c.TTL/10, 20*time.Millisecond), time.Second)
}

// WithTTL sets the lease time: how long the lock outlives a holder that
// stops renewing it, because it crashed, paused or lost its network. The
// default is DefaultTTL (30s); it must be between MinTTL and MaxTTL. With
// renewal on, a lease is renewed every TTL/3. In session mode it also sets
// the wait_timeout of the holder's connection, rounded up to whole
// seconds: the database ends a session that has been silent that long,
// and its GET_LOCK lock with it.
func WithTTL(ttl time.Duration) Option { return func(c *config) { c.TTL = ttl } }

// WithoutRenewal makes a fixed lease: it is never renewed by the watchdog
// and ends, with an error matching dlock.ErrExpired, when its TTL runs out,
// unless the holder calls Refresh. Renewal is on by default.
func WithoutRenewal() Option { return func(c *config) { c.Renew = false } }

// WithMaxHold caps how long one lease can be held, in either mode: the
// watchdog renews it until d after it was granted and no further, and the
// lease then ends, with an error matching dlock.ErrMaxHold and
// dlock.ErrLost, and frees the lock. Until never passes the cap, so Done
// closes by then. The default is 0: no cap.
func WithMaxHold(d time.Duration) Option { return func(c *config) { c.MaxHold = d } }

// WithRetry sets how Lock waits between attempts, those that found the
// database unavailable included; see DefaultRetry.
// dlock.NoRetry() makes Lock a single attempt, and dlock.MaxAttempts
// bounds the attempts.
func WithRetry(s dlock.RetryStrategy) Option { return func(c *config) { c.Retry = s } }
