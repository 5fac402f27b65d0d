package dlock_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

func TestRetryStrategies(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name     string
		s        dlock.RetryStrategy
		attempt  int
		min, max time.Duration
		ok       bool
	}{
		{"no retry", dlock.NoRetry(), 1, 0, 0, false},
		{"linear first", dlock.LinearBackoff(10*ms, 35*ms), 1, 10 * ms, 10 * ms, true},
		{"linear third", dlock.LinearBackoff(10*ms, 35*ms), 3, 30 * ms, 30 * ms, true},
		{"linear capped", dlock.LinearBackoff(10*ms, 35*ms), 9, 35 * ms, 35 * ms, true},
		{"linear huge attempt", dlock.LinearBackoff(10*ms, 35*ms), 1 << 62, 35 * ms, 35 * ms, true},
		{"exp first", dlock.ExponentialBackoff(4*ms, 100*ms), 1, 4 * ms, 4 * ms, true},
		{"exp third", dlock.ExponentialBackoff(4*ms, 100*ms), 3, 4 * ms, 16 * ms, true},
		{"exp capped", dlock.ExponentialBackoff(4*ms, 100*ms), 20, 4 * ms, 100 * ms, true},
		{"exp huge attempt", dlock.ExponentialBackoff(4*ms, 100*ms), 1000, 4 * ms, 100 * ms, true},
		{"limit within", dlock.MaxAttempts(dlock.LinearBackoff(ms, ms), 3), 2, ms, ms, true},
		{"limit reached", dlock.MaxAttempts(dlock.LinearBackoff(ms, ms), 3), 3, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := dlock.CheckRetry(tt.s); err != nil {
				t.Fatalf("CheckRetry: %v", err)
			}
			for range 200 {
				d, ok := tt.s.Backoff(tt.attempt)
				if ok != tt.ok || d < tt.min || d > tt.max {
					t.Fatalf("Backoff(%d) = %v, %v; want [%v, %v], %v", tt.attempt, d, ok, tt.min, tt.max, tt.ok)
				}
			}
		})
	}
}

func TestExponentialBackoffIsJittered(t *testing.T) {
	s := dlock.ExponentialBackoff(time.Millisecond, time.Second)
	seen := map[time.Duration]bool{}
	for range 100 {
		d, _ := s.Backoff(8)
		seen[d] = true
	}
	if len(seen) < 50 {
		t.Fatalf("100 backoffs gave only %d distinct waits; want jitter", len(seen))
	}
}

func TestRetryStrategyBadArguments(t *testing.T) {
	for name, s := range map[string]dlock.RetryStrategy{
		"nil":              nil,
		"linear zero step": dlock.LinearBackoff(0, time.Second),
		"linear max<step":  dlock.LinearBackoff(time.Second, time.Millisecond),
		"exp zero min":     dlock.ExponentialBackoff(0, time.Second),
		"exp max<min":      dlock.ExponentialBackoff(time.Second, time.Millisecond),
		"limit zero":       dlock.MaxAttempts(dlock.NoRetry(), 0),
		"limit of bad":     dlock.MaxAttempts(dlock.LinearBackoff(0, 0), 3),
	} {
		if err := dlock.CheckRetry(s); err == nil {
			t.Errorf("%s: CheckRetry = nil; want an error", name)
		}
		if s != nil {
			if _, ok := s.Backoff(1); ok {
				t.Errorf("%s: invalid strategy allowed a retry", name)
			}
		}
	}
}

func TestRetryStrategyConcurrentUse(t *testing.T) {
	s := dlock.MaxAttempts(dlock.ExponentialBackoff(time.Millisecond, 10*time.Millisecond), 5)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for a := 1; a < 1000; a++ {
				s.Backoff(a%7 + 1)
			}
		})
	}
	wg.Wait()
}

func TestErrorsMatch(t *testing.T) {
	err := dlock.NotObtained(errors.New("x"))
	if !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatal("NotObtained does not match ErrNotObtained")
	}
	lost := dlock.Lost(dlock.ErrExpired)
	if !errors.Is(lost, dlock.ErrLost) || !errors.Is(lost, dlock.ErrExpired) {
		t.Fatalf("Lost(ErrExpired) = %v; want both", lost)
	}
}

func TestNewToken(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		tok := dlock.NewToken()
		if len(tok) != 22 || seen[tok] {
			t.Fatalf("token %q: bad length or repeated", tok)
		}
		seen[tok] = true
	}
}
