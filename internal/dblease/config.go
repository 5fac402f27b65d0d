package dblease

import (
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/lease"
)

// Apply applies opts, skipping nil ones, to c.
func Apply[T any, O ~func(*T)](c *T, opts []O) {
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
}

// ClientConfig is what a Client's options set.
type ClientConfig struct {
	Table   string         // WithTable's name, as given
	Obs     dlock.Observer // WithObserver's; nil for none
	Log     *slog.Logger   // WithLogger's; nil for none
	Restart RestartWindow
}

// NewClientConfig returns the options of a Client that opts set, skipping
// nil ones, over the defaults: table, and none other.
func NewClientConfig[O ~func(*ClientConfig)](table string, opts []O) ClientConfig {
	c := ClientConfig{Table: table}
	Apply(&c, opts)
	return c
}

// WithRestartWindow is the option WithRestartWindow(d) of either package.
func WithRestartWindow(d time.Duration) func(*ClientConfig) {
	return func(c *ClientConfig) { c.Restart.Window, c.Restart.Set = d, true }
}

// Config is what a lock's options set, in either mode.
type Config struct {
	TTL     time.Duration
	Renew   bool
	Retry   dlock.RetryStrategy
	MaxHold time.Duration
}

// NewConfig returns the defaults of a lock: renewal on, and the given TTL
// and retry strategy.
func NewConfig(ttl time.Duration, retry dlock.RetryStrategy) Config {
	return Config{TTL: ttl, Renew: true, Retry: retry}
}

// Check returns the error, naming package pkg, of options that are out of
// range: a TTL outside minTTL to maxTTL, a negative maximum hold, or a bad
// retry strategy.
func (c Config) Check(pkg string, minTTL, maxTTL time.Duration) error {
	if err := lease.CheckTTL(pkg, c.TTL, minTTL, maxTTL); err != nil {
		return err
	}
	if c.MaxHold < 0 {
		return fmt.Errorf("%s: WithMaxHold(%v): want a positive duration, or 0 for no cap", pkg, c.MaxHold)
	}
	return dlock.CheckRetry(c.Retry)
}

// Windows returns, in whole units of unit, how long a server whose
// identity changed, and one that started, grants a lock of these options
// nothing under restart window w: 0 for not at all.
func (c Config) Windows(w RestartWindow, unit time.Duration) (identity, restart int64) {
	i, r := w.Spans(c.TTL)
	return Units(i, unit), Units(r, unit)
}

// Units returns d in whole units, rounded up: a TTL so given to the
// database never holds a lease for less than the TTL.
func Units(d, unit time.Duration) int64 {
	return int64((d + unit - 1) / unit)
}

// A RestartWindow is a Client's restart detection, as its options set it
// (WithRestartWindow, WithoutRestartDetection in either package): after a
// change of the server's identity (a failover, a restore to another
// timeline), no grant for each lock's TTL, or the window if it is longer;
// and, with a window, no grant for the window after the server started.
type RestartWindow struct {
	Window time.Duration // WithRestartWindow's d; 0 if it was not given
	Set    bool          // WithRestartWindow was given
	Off    bool          // WithoutRestartDetection was given
}

// Check returns the error, naming package pkg, of a window that is not
// positive.
func (w RestartWindow) Check(pkg string) error {
	if w.Set && !w.Off && w.Window <= 0 {
		return fmt.Errorf("%s: restart window %v must be positive; set it with WithRestartWindow (WithoutRestartDetection turns detection off)", pkg, w.Window)
	}
	return nil
}

// CheckTTL returns the error, naming package pkg, of a lock whose TTL is
// longer than the window: a restored server could grant it while a lease
// it had granted before is still valid.
func (w RestartWindow) CheckTTL(pkg string, ttl time.Duration) error {
	if w.Set && !w.Off && ttl > w.Window {
		return fmt.Errorf("%s: TTL %v is longer than the Client's restart window %v: a database restored or restarted could grant a second holder while a lease it had granted is still valid; give every Client of the database WithRestartWindow(%v) or more, or use a shorter TTL",
			pkg, ttl, w.Window, ttl)
	}
	return nil
}

// Spans returns, for a lock of TTL ttl, how long a server grants it no
// lock after its identity changed, and after it started: 0 for never.
func (w RestartWindow) Spans(ttl time.Duration) (identity, restart time.Duration) {
	if w.Off {
		return 0, 0
	}
	return max(ttl, w.Window), w.Window
}

// Abstaining returns the error, naming package pkg, of an attempt on lock
// name that a server within a restart window refused, for left more. It
// matches dlock.ErrNotObtained.
func Abstaining(pkg, name string, left time.Duration) error {
	return dlock.NotObtained(fmt.Errorf("%s: the database server started, or changed (a failover, a restore), less than its restart window ago: it grants %q to no one for %v more, so that no lease granted before can still be valid (see WithRestartWindow)",
		pkg, name, left))
}

// CheckName returns the error, naming package pkg, of a lock or resource
// name (what says which) that is empty, longer than max bytes, or not
// valid UTF-8.
func CheckName(pkg, what, name string, max int) error {
	switch {
	case name == "":
		return fmt.Errorf("%s: empty %s name", pkg, what)
	case len(name) > max:
		return fmt.Errorf("%s: %s name of %d bytes is longer than the limit of %d", pkg, what, len(name), max)
	case !utf8.ValidString(name):
		return fmt.Errorf("%s: %s name %q is not valid UTF-8", pkg, what, name)
	}
	return nil
}
