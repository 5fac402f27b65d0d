package sqllease

import (
	"fmt"
	"time"

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

// Units returns d in whole units, rounded up: a TTL so given to the
// database never holds a lease for less than the TTL.
func Units(d, unit time.Duration) int64 {
	return int64((d + unit - 1) / unit)
}
