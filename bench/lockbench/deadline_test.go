package lockbench

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// stuckClient is a lock client whose calls hang: Lock (and Release) until
// its context ends when honest, forever when not.
type stuckClient struct {
	honest  bool
	lockAll bool // every Lock hangs; otherwise only every other one
	mu      sync.Mutex
	calls   int
	forever chan struct{}
}

func (s *stuckClient) Lock(ctx context.Context, key string) (Release, error) {
	s.mu.Lock()
	s.calls++
	hang := s.lockAll || s.calls%2 == 0
	s.mu.Unlock()
	if !hang {
		return func(context.Context) error { return nil }, nil
	}
	if s.honest {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	<-s.forever
	return nil, errors.New("unreachable")
}

func (s *stuckClient) Close() error { return nil }

func shortDeadlines(t *testing.T) {
	oldCall, oldSlack := CallTimeout, runSlack
	CallTimeout, runSlack = 50*time.Millisecond, 100*time.Millisecond
	t.Cleanup(func() { CallTimeout, runSlack = oldCall, oldSlack })
}

// A Lock that waits past its deadline is counted as a timeout, and the
// run goes on: the other cycles still count.
func TestCallDeadlinesAreCounted(t *testing.T) {
	shortDeadlines(t)
	cl := &stuckClient{honest: true}
	start := time.Now()
	m, err := serialCycles(cl, "k", 300*time.Millisecond)
	if err != nil {
		t.Fatalf("serialCycles: %v", err)
	}
	if took := time.Since(start); took > 300*time.Millisecond+2*CallTimeout {
		t.Errorf("the run took %s", took)
	}
	if m["timeouts"] < 1 || m["cycles"] < 1 {
		t.Errorf("timeouts %v, cycles %v: want both counted", m["timeouts"], m["cycles"])
	}

	var to timeouts
	n, err := hammer(cl, 4, "h", time.Now().Add(200*time.Millisecond), &to)
	if err != nil || n < 1 || to.n.Load() < 1 {
		t.Errorf("hammer: %d cycles, %d timeouts, err %v: want both counted and no error", n, to.n.Load(), err)
	}
}

// A run whose call ignores its deadline is abandoned at the run's bound
// and recorded as an error; once the benchmark's limit has passed no run
// starts.
func TestRunsAreBounded(t *testing.T) {
	shortDeadlines(t)
	cfg := ShortConfig()
	cfg.Duration, cfg.RedlockDuration, cfg.Warmup, cfg.R1TTL, cfg.Rounds = 10*time.Millisecond, 0, 0, 0, 0
	cfg.Leases = 0
	res := &Results{cfg: cfg, start: time.Now()}
	cl := &stuckClient{lockAll: true, forever: make(chan struct{})}
	t.Cleanup(func() { close(cl.forever) })

	start := time.Now()
	_, err := res.bounded(func() (Metrics, error) {
		_, err := cl.Lock(context.Background(), "k") // what a hung peer does
		return nil, err
	})
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "abandoned") || res.abandoned != 1 {
		t.Fatalf("err %v, abandoned %d: want the run abandoned", err, res.abandoned)
	}
	if took > cfg.runBound()+time.Second {
		t.Errorf("abandoned after %s; its bound is %s", took, cfg.runBound())
	}

	res.cfg.Limit = time.Nanosecond
	ran := false
	if _, err := res.bounded(func() (Metrics, error) { ran = true; return nil, nil }); !errors.Is(err, errRunLimit) || ran {
		t.Errorf("after the limit: err %v, ran %v; want errRunLimit and no run", err, ran)
	}
}
