package renewal

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBatchesAndStops(t *testing.T) {
	var mu sync.Mutex
	var batches [][]*Entry
	s := New(func(_ context.Context, batch []*Entry) []time.Time {
		mu.Lock()
		batches = append(batches, batch)
		mu.Unlock()
		next := make([]time.Time, len(batch))
		for i := range next {
			next[i] = time.Now().Add(30 * time.Millisecond)
		}
		return next
	})
	entries := make([]*Entry, 100)
	for i := range entries {
		entries[i] = &Entry{Value: i}
		s.Add(entries[i], 30*time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	for _, e := range entries {
		s.Remove(e)
	}
	mu.Lock()
	n, renewed := len(batches), 0
	for _, b := range batches {
		renewed += len(b)
	}
	mu.Unlock()
	if renewed < 400 {
		t.Errorf("%d renewals of 100 entries in about 6 periods; want at least 400", renewed)
	}
	if n > renewed/50 {
		t.Errorf("%d batches for %d renewals; want them batched", n, renewed)
	}
	// A batch taken off the queue before Remove still runs once (its
	// goroutine may start late on a loaded machine); none follows it.
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	n = len(batches)
	mu.Unlock()
	time.Sleep(150 * time.Millisecond)
	mu.Lock()
	after := len(batches)
	mu.Unlock()
	if after != n || s.Len() != 0 {
		t.Errorf("renewals continued after Remove: %d -> %d batches, %d queued", n, after, s.Len())
	}
	s.Close()
	if s.Add(&Entry{}, time.Millisecond) {
		t.Error("Add after Close succeeded")
	}
}

func TestRemoveDuringBatchIsNotRescheduled(t *testing.T) {
	var calls atomic.Int32
	var s *Scheduler
	e := &Entry{}
	s = New(func(_ context.Context, batch []*Entry) []time.Time {
		calls.Add(1)
		s.Remove(e) // the lease ended while its renewal was in flight
		return []time.Time{time.Now().Add(10 * time.Millisecond)}
	})
	defer s.Close()
	s.Add(e, 10*time.Millisecond)
	time.Sleep(100 * time.Millisecond)
	if c := calls.Load(); c != 1 {
		t.Errorf("renewed %d times; want once, then dropped", c)
	}
}

func TestCloseWaitsForBatch(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	s := New(func(ctx context.Context, batch []*Entry) []time.Time {
		close(started)
		<-ctx.Done() // Close cancels the batch's context
		<-release
		finished.Store(true)
		return make([]time.Time, len(batch))
	})
	s.Add(&Entry{}, time.Millisecond)
	<-started
	go func() { time.Sleep(50 * time.Millisecond); close(release) }()
	s.Close()
	if !finished.Load() {
		t.Error("Close returned before the in-flight batch")
	}
}

// More entries than one batch holds are renewed by batches in flight at
// the same time: a round trip of 100ms per batch does not stretch the
// period of 5 batches' worth of entries to 500ms.
func TestBatchesRunInParallel(t *testing.T) {
	const batches = 5
	var running, most atomic.Int64
	var renewals atomic.Int64
	s := New(func(_ context.Context, batch []*Entry) []time.Time {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(100 * time.Millisecond) // a slow round trip
		running.Add(-1)
		renewals.Add(int64(len(batch)))
		next := make([]time.Time, len(batch))
		for i := range next {
			next[i] = time.Now().Add(time.Hour)
		}
		return next
	})
	defer s.Close()
	for range batches * MaxBatch {
		s.Add(&Entry{}, 10*time.Millisecond)
	}
	deadline := time.Now().Add(10 * time.Second)
	for renewals.Load() < batches*MaxBatch && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := renewals.Load(); got != batches*MaxBatch {
		t.Fatalf("%d of %d entries renewed", got, batches*MaxBatch)
	}
	if m := most.Load(); m < 2 || m > MaxInFlight {
		t.Errorf("at most %d batches ran at once; want between 2 and %d", m, MaxInFlight)
	}
}

// AddFirst renews first after first, not after period; the entry keeps
// period for batching.
func TestAddFirst(t *testing.T) {
	fired := make(chan time.Time, 1)
	s := New(func(_ context.Context, batch []*Entry) []time.Time {
		fired <- time.Now()
		return make([]time.Time, len(batch)) // stop renewing
	})
	defer s.Close()
	e := &Entry{}
	start := time.Now()
	s.AddFirst(e, time.Hour, 20*time.Millisecond)
	select {
	case at := <-fired:
		if d := at.Sub(start); d < 20*time.Millisecond {
			t.Errorf("first renewal after %v; want at least 20ms", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no renewal 30s after AddFirst with a first renewal after 20ms")
	}
	if e.period != time.Hour {
		t.Errorf("period %v; want 1h", e.period)
	}
}
