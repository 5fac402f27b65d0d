package dlock

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// A RetryStrategy decides how long Locker.Lock waits between attempts.
// Implementations must be safe for concurrent use: one strategy may be shared
// by many locks and goroutines. The strategies in this package keep no state.
//
// A backend that is woken when a lock is released (Redis pub/sub, a
// ZooKeeper watch) retries at once on a wake-up; the strategy then only
// bounds how long a waiter sleeps when a wake-up is missed.
type RetryStrategy interface {
	// Backoff returns how long to wait after the attempt-th failed attempt
	// (attempt counts from 1), or ok == false to give up.
	Backoff(attempt int) (wait time.Duration, ok bool)
}

// CheckRetry reports whether s can be used: a nil strategy, or one built by
// this package from invalid arguments, gets an error naming the problem.
// Backends call it before they start waiting.
func CheckRetry(s RetryStrategy) error {
	if s == nil {
		return errors.New("dlock: retry strategy is nil; use dlock.NoRetry() for a single attempt")
	}
	if v, ok := s.(interface{ err() error }); ok {
		return v.err()
	}
	return nil
}

type noRetry struct{}

// NoRetry returns a strategy that gives up after the first attempt, so that
// Lock behaves like TryLock.
func NoRetry() RetryStrategy { return noRetry{} }

func (noRetry) Backoff(int) (time.Duration, bool) { return 0, false }
func (noRetry) err() error                        { return nil }

type linear struct {
	step, max time.Duration
	bad       error
}

// LinearBackoff returns a strategy that waits attempt*step after the
// attempt-th failure, never more than max, and retries for ever. Both must
// be positive and max at least step.
func LinearBackoff(step, max time.Duration) RetryStrategy {
	if step <= 0 || max < step {
		return linear{bad: fmt.Errorf("dlock: LinearBackoff(%v, %v): step must be > 0 and max >= step", step, max)}
	}
	return linear{step: step, max: max}
}

func (l linear) Backoff(attempt int) (time.Duration, bool) {
	if l.bad != nil {
		return 0, false
	}
	if attempt < 1 {
		attempt = 1
	}
	if d := time.Duration(attempt) * l.step; d/l.step == time.Duration(attempt) && d <= l.max {
		return d, true
	}
	return l.max, true
}
func (l linear) err() error { return l.bad }

type exponential struct {
	min, max time.Duration
	bad      error
}

// ExponentialBackoff returns a strategy with "full jitter": after the
// attempt-th failure it waits a uniformly random time in
// [min, min(max, min*2^(attempt-1))], and retries for ever. min must be
// positive and max at least min.
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	if min <= 0 || max < min {
		return exponential{bad: fmt.Errorf("dlock: ExponentialBackoff(%v, %v): min must be > 0 and max >= min", min, max)}
	}
	return exponential{min: min, max: max}
}

func (e exponential) Backoff(attempt int) (time.Duration, bool) {
	if e.bad != nil {
		return 0, false
	}
	ceil := e.max
	if attempt >= 1 && attempt < 63 {
		if d := e.min << (attempt - 1); d > 0 && d>>(attempt-1) == e.min && d < e.max {
			ceil = d
		}
	} else if attempt < 1 {
		ceil = e.min
	}
	return e.min + rand.N(ceil-e.min+1), true
}
func (e exponential) err() error { return e.bad }

type limited struct {
	s   RetryStrategy
	n   int
	bad error
}

// MaxAttempts returns a strategy that follows s but gives up after n
// attempts in all, the first one included. n must be at least 1.
func MaxAttempts(s RetryStrategy, n int) RetryStrategy {
	if err := CheckRetry(s); err != nil {
		return limited{bad: err}
	}
	if n < 1 {
		return limited{bad: fmt.Errorf("dlock: MaxAttempts(%d): n must be >= 1", n)}
	}
	return limited{s: s, n: n}
}

func (l limited) Backoff(attempt int) (time.Duration, bool) {
	if l.bad != nil || attempt >= l.n {
		return 0, false
	}
	return l.s.Backoff(attempt)
}
func (l limited) err() error { return l.bad }
