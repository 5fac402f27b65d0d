// Package renewal is the watchdog shared by dlock's backends: one
// scheduler per client that renews every due lease in batches, so that a
// client holding ten thousand leases makes one round trip per batch rather
// than one per lease.
package renewal

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// MaxBatch is the largest number of entries handed to one RenewFunc call.
const MaxBatch = 4096

// An Entry is one lease under renewal. The backend owns Value.
type Entry struct {
	Value  any
	due    time.Time
	period time.Duration
	index  int // in the heap; -1 when not scheduled
}

// RenewFunc renews a batch of entries, normally in one round trip, and
// returns for each entry the time it should next be renewed, or the zero
// time to stop renewing it. It must return a slice of len(batch).
type RenewFunc func(ctx context.Context, batch []*Entry) []time.Time

// A Scheduler calls its RenewFunc from one goroutine, with every entry due
// within a quarter period of the earliest due one, so that entries drift
// into shared batches. It starts its goroutine on the first Add.
type Scheduler struct {
	renew RenewFunc

	mu      sync.Mutex
	q       queue
	wake    chan struct{}
	stop    chan struct{}
	stopped chan struct{}
	running bool
	closed  bool
}

// New returns a Scheduler that renews with fn.
func New(fn RenewFunc) *Scheduler {
	return &Scheduler{renew: fn, wake: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{})}
}

// Add schedules e for renewal every period, the first at now+period. It
// reports false if the scheduler is closed.
func (s *Scheduler) Add(e *Entry, period time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	e.period = period
	e.due = time.Now().Add(period)
	heap.Push(&s.q, e)
	if !s.running {
		s.running = true
		go s.loop()
	}
	if e.index == 0 {
		s.poke()
	}
	return true
}

// Remove stops renewing e. It is safe to call for an entry that is not
// scheduled, including one that is being renewed right now: that entry is
// then not rescheduled.
func (s *Scheduler) Remove(e *Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.index >= 0 && e.index < len(s.q) && s.q[e.index] == e {
		heap.Remove(&s.q, e.index)
	}
	e.index = -2 // removed: not rescheduled by an in-flight batch
}

// Len returns the number of scheduled entries.
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.q)
}

// Close stops the scheduler and waits for an in-flight batch to return.
func (s *Scheduler) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	running := s.running
	s.mu.Unlock()
	close(s.stop)
	if running {
		<-s.stopped
	}
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) loop() {
	defer close(s.stopped)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-s.stop; cancel() }()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		batch, wait := s.due()
		if len(batch) == 0 {
			timer.Reset(wait)
			select {
			case <-s.stop:
				return
			case <-s.wake:
			case <-timer.C:
			}
			continue
		}
		next := s.renew(ctx, batch)
		s.mu.Lock()
		for i, e := range batch {
			if e.index == -2 || i >= len(next) || next[i].IsZero() {
				e.index = -1
				continue
			}
			e.due = next[i]
			heap.Push(&s.q, e)
		}
		s.mu.Unlock()
	}
}

// due pops the entries due now (with their batch-mates), or returns how long
// to wait for the earliest.
func (s *Scheduler) due() ([]*Entry, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.q) == 0 {
		return nil, time.Hour
	}
	now := time.Now()
	first := s.q[0]
	if wait := first.due.Sub(now); wait > 0 {
		return nil, wait
	}
	horizon := now.Add(first.period / 4)
	var batch []*Entry
	for len(s.q) > 0 && len(batch) < MaxBatch && !s.q[0].due.After(horizon) {
		e := heap.Pop(&s.q).(*Entry)
		e.index = -1
		batch = append(batch, e)
	}
	return batch, 0
}

type queue []*Entry

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].due.Before(q[j].due) }
func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *queue) Push(x any) { e := x.(*Entry); e.index = len(*q); *q = append(*q, e) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}
