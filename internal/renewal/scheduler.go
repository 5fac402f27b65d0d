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

// MaxInFlight is the largest number of RenewFunc calls running at once: a
// client holding more leases than one batch can renew in a round trip
// keeps several round trips in flight, so that its renewals keep their
// period until the server or the network is the limit.
const MaxInFlight = 8

// An Entry is one lease under renewal. The backend owns Value.
type Entry struct {
	Value  any
	due    moment
	period time.Duration
	index  int // in the heap; -1 when not scheduled
}

// A moment is a time as the scheduler keeps it: nanoseconds since epoch,
// a monotonic clock reading, in 8 bytes rather than a time.Time's 24.
type moment int64

var epoch = time.Now()

func at(t time.Time) moment { return moment(t.Sub(epoch)) }

func (m moment) time() time.Time { return epoch.Add(time.Duration(m)) }

// RenewFunc renews a batch of entries, normally in one round trip, and
// returns for each entry the time it should next be renewed, or the zero
// time to stop renewing it. It must return a slice of len(batch).
type RenewFunc func(ctx context.Context, batch []*Entry) []time.Time

// A Scheduler calls its RenewFunc with every entry due within a quarter
// period of the earliest due one (at most MaxBatch), so that entries drift
// into shared batches. It runs up to MaxInFlight batches at a time, each
// on a goroutine of its own. Between batches it holds no goroutine: a
// timer armed for the earliest due entry starts the next one, and adding
// an entry only re-arms that timer.
type Scheduler struct {
	renew  RenewFunc
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu       sync.Mutex
	q        queue
	timer    *time.Timer
	armedAt  moment // when timer fires; 0 when it is not armed
	inFlight int    // batches running
	closed   bool
	running  sync.WaitGroup
}

// New returns a Scheduler that renews with fn.
func New(fn RenewFunc) *Scheduler {
	ctx, cancel := context.WithCancel(context.Background())
	return &Scheduler{renew: fn, ctx: ctx, cancel: cancel}
}

// Add schedules e for renewal every period, the first at now+period. It
// reports false if the scheduler is closed.
func (s *Scheduler) Add(e *Entry, period time.Duration) bool {
	return s.AddFirst(e, period, period)
}

// AddFirst is like Add, with the first renewal at now+first.
func (s *Scheduler) AddFirst(e *Entry, period, first time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	e.period = period
	e.due = at(time.Now().Add(first))
	heap.Push(&s.q, e)
	if s.inFlight < MaxInFlight && (s.armedAt == 0 || e.due < s.armedAt) {
		s.arm(e.due)
	}
	return true
}

// arm sets the timer for t. s.mu must be held.
func (s *Scheduler) arm(t moment) {
	s.armedAt = max(t, 1)
	if s.timer == nil {
		s.timer = time.AfterFunc(time.Until(t.time()), s.fire)
	} else {
		s.timer.Reset(time.Until(t.time()))
	}
}

// Remove stops renewing e. It is safe to call for an entry that is not
// scheduled, including one that is being renewed right now: that entry is
// then not rescheduled. The timer is left alone; firing early is harmless.
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
	if s.timer != nil {
		s.timer.Stop()
	}
	s.mu.Unlock()
	s.cancel()
	s.running.Wait()
}

// fire starts the batches that are due.
func (s *Scheduler) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armedAt = 0
	s.startDue()
}

// startDue starts a goroutine for each batch due now, up to MaxInFlight
// running, then arms the timer for the earliest entry left if another
// batch may start. s.mu must be held.
func (s *Scheduler) startDue() {
	if s.closed {
		return
	}
	for s.inFlight < MaxInFlight {
		batch := s.due()
		if batch == nil {
			break
		}
		s.inFlight++
		s.running.Add(1)
		go s.run(batch)
	}
	if s.inFlight < MaxInFlight && len(s.q) > 0 {
		s.arm(s.q[0].due)
	}
	// Otherwise the end of a running batch starts the next one.
}

// run renews one batch and reschedules its entries.
func (s *Scheduler) run(batch []*Entry) {
	defer s.running.Done()
	next := s.renew(s.ctx, batch)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range batch {
		if e.index == -2 || i >= len(next) || next[i].IsZero() {
			e.index = -1
			continue
		}
		e.due = at(next[i])
		heap.Push(&s.q, e)
	}
	s.inFlight--
	s.startDue()
}

// due pops the entries due now (with their batch-mates), or returns nil
// if none is due. s.mu must be held.
func (s *Scheduler) due() []*Entry {
	now := at(time.Now())
	if len(s.q) == 0 || s.q[0].due > now {
		return nil
	}
	first := s.q[0]
	horizon := now + moment(first.period/4)
	var batch []*Entry
	for len(s.q) > 0 && len(batch) < MaxBatch && s.q[0].due <= horizon {
		e := heap.Pop(&s.q).(*Entry)
		e.index = -1
		batch = append(batch, e)
	}
	return batch
}

type queue []*Entry

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].due < q[j].due }
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
