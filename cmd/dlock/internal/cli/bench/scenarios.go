package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/cmd/dlock/internal/cli/backend"
)

// What one latency of a Result is.
const (
	MeasureCycle    = "cycle"     // TryLock + Release, uncontended
	MeasureHandOver = "hand-over" // a holder's Release call to the next holder's Lock returning
	MeasureWait     = "wait"      // Lock called to Lock returned
)

const (
	warmCycles     = 10                    // untimed cycles before S1 and S4 (S2: one per goroutine)
	maxShownErrors = 3                     // distinct error messages kept per scenario
	errorPause     = 10 * time.Millisecond // after a failed attempt, so that a dead service is not spun on
	nodeConnect    = 5 * time.Second       // S4: connecting to one node
	batchSize      = 128                   // latencies a worker buffers before merging them
	lockWaitSlack  = 5 * time.Second       // preflight and S3 warm-up: how much longer than a TTL to wait
	releaseTimeout = 10 * time.Second      // bounds one Release
	s4MinPerNode   = 20 * time.Millisecond // S4: the least time each node gets
)

// A Result is what one scenario, or for S4 one node, measured.
type Result struct {
	ID          string
	Description string
	Node        string // S4: the server measured alone
	Measures    string // what one latency is: MeasureCycle, MeasureHandOver or MeasureWait
	Elapsed     time.Duration
	Ops         int64 // completed cycles (S3: acquisitions)
	Errors      int64
	FirstErrors []string // the first few distinct error messages
	Checked     bool     // mutual exclusion was checked (S3, except --kind read)
	Overlaps    int64    // holders beyond what the kind admits, seen at once
	Regressions int64    // fences that did not increase; also counted in Errors
	Latency     Recorder
	Contention  *Contention // S3 only
}

// Contention holds S3's numbers besides its latencies.
type Contention struct {
	Clients    int
	Wait       Recorder // Lock called to Lock returned
	Switches   int64    // acquisitions by another client than the previous holder
	ShareMin   float64  // fewest acquisitions by one client ÷ a fair share
	ShareMax   float64  // most acquisitions by one client ÷ a fair share
	MaxHolders int64    // most holders seen at once
}

// OpsPerSec returns the completed operations per second of wall time.
func (r *Result) OpsPerSec() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// Label names the row: "S1", or "S4 host:port".
func (r *Result) Label() string {
	if r.Node != "" {
		return r.ID + " " + r.Node
	}
	return r.ID
}

// tally is what the workers of a scenario count as they run.
type tally struct {
	ops, errs, overlaps, regressions atomic.Int64

	mu    sync.Mutex
	first []string
}

func (t *tally) fail(err error) {
	t.errs.Add(1)
	msg := err.Error()
	t.mu.Lock()
	if len(t.first) < maxShownErrors && !slices.Contains(t.first, msg) {
		t.first = append(t.first, msg)
	}
	t.mu.Unlock()
}

// regressed counts a fence that did not increase: a safety violation.
func (t *tally) regressed(name string, fence, last uint64) {
	t.regressions.Add(1)
	t.fail(fmt.Errorf("lock %q: fence %d granted after fence %d; fences must increase", name, fence, last))
}

// into copies the counts into r.
func (t *tally) into(r *Result) {
	r.Ops, r.Errors, r.Overlaps, r.Regressions = t.ops.Load(), t.errs.Load(), t.overlaps.Load(), t.regressions.Load()
	t.mu.Lock()
	r.FirstErrors = slices.Clone(t.first)
	t.mu.Unlock()
}

// syncRecorder is a Recorder that workers add batches to.
type syncRecorder struct {
	mu sync.Mutex
	r  Recorder
}

func (s *syncRecorder) add(batch []time.Duration) {
	s.mu.Lock()
	for _, d := range batch {
		s.r.Record(d)
	}
	s.mu.Unlock()
}

// batcher buffers one worker's latencies for a syncRecorder.
type batcher struct {
	to  *syncRecorder
	buf []time.Duration
}

func newBatcher(to *syncRecorder) *batcher {
	return &batcher{to: to, buf: make([]time.Duration, 0, batchSize)}
}

func (b *batcher) record(d time.Duration) {
	b.buf = append(b.buf, d)
	if len(b.buf) == cap(b.buf) {
		b.flush()
	}
}

func (b *batcher) flush() {
	b.to.add(b.buf)
	b.buf = b.buf[:0]
}

// pause waits errorPause, or less if ctx ends or end comes first.
func pause(ctx context.Context, end time.Time) {
	t := time.NewTimer(min(errorPause, max(time.Until(end), 0)))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// release releases lease with its own deadline, so that a lease taken just
// before an interrupt is still given back.
func release(lease dlock.Lease) error {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	return lease.Release(ctx)
}

// cycle takes l with one attempt and releases it, and checks that its fence
// is above *last (the previous fence of the same name, or 0).
func cycle(ctx context.Context, l dlock.Locker, name string, last *uint64, t *tally) (time.Duration, error) {
	t0 := time.Now()
	lease, err := l.TryLock(ctx)
	if err != nil {
		return 0, fmt.Errorf("TryLock %q: %w", name, err)
	}
	fence := lease.Fence()
	err = release(lease)
	d := time.Since(t0)
	if err != nil {
		return d, fmt.Errorf("Release %q: %w", name, err)
	}
	if fence <= *last {
		t.regressed(name, fence, *last)
	}
	*last = max(*last, fence)
	return d, nil
}

// serial runs uncontended cycles on l from one goroutine for d, after
// warmCycles untimed ones: S1, and S4 on each node.
func (r *runner) serial(ctx context.Context, res *Result, l dlock.Locker, name string, d time.Duration) {
	t := &tally{}
	var last uint64
	for range warmCycles {
		if _, err := cycle(ctx, l, name, &last, t); err != nil {
			if ctx.Err() != nil {
				return
			}
			t.fail(err)
			break // the timed part reports the rest
		}
	}
	stop := r.prog.track(res.Label(), t, d)
	start := time.Now()
	end := start.Add(d)
	for ctx.Err() == nil && time.Now().Before(end) {
		lat, err := cycle(ctx, l, name, &last, t)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			t.fail(err)
			pause(ctx, end)
			continue
		}
		res.Latency.Record(lat)
		t.ops.Add(1)
	}
	res.Elapsed = time.Since(start)
	stop()
	t.into(res)
}

// s1: one goroutine, uncontended cycles on one name.
func (r *runner) s1(ctx context.Context) []*Result {
	res := &Result{ID: "S1", Description: "uncontended lock + release, 1 goroutine", Measures: MeasureCycle}
	name := r.o.name("S1")
	l, err := r.target.Locker(name, r.lockOptions())
	if err != nil {
		return r.failed(res, err)
	}
	r.serial(ctx, res, l, name, r.o.Duration)
	return []*Result{res}
}

// s2: --goroutines goroutines share the connection, each cycling on its
// own name; they start together after one warm-up cycle each.
func (r *runner) s2(ctx context.Context) []*Result {
	g := r.o.Goroutines
	res := &Result{ID: "S2", Description: fmt.Sprintf("uncontended lock + release, %d goroutines on one connection", g), Measures: MeasureCycle}
	t := &tally{}
	var (
		rec   syncRecorder
		ready sync.WaitGroup
		done  sync.WaitGroup
		start = make(chan struct{})
		end   time.Time
	)
	ready.Add(g)
	for i := range g {
		done.Go(func() {
			name := r.o.name("S2", strconv.Itoa(i))
			var last uint64
			l, err := r.target.Locker(name, r.lockOptions())
			if err == nil {
				_, err = cycle(ctx, l, name, &last, t)
			}
			ready.Done()
			if err != nil {
				if ctx.Err() == nil {
					t.fail(err)
				}
				return
			}
			<-start
			b := newBatcher(&rec)
			defer b.flush()
			for ctx.Err() == nil && time.Now().Before(end) {
				lat, err := cycle(ctx, l, name, &last, t)
				if err != nil {
					if ctx.Err() != nil {
						return
					}
					t.fail(err)
					pause(ctx, end)
					continue
				}
				b.record(lat)
				t.ops.Add(1)
			}
		})
	}
	ready.Wait()
	stop := r.prog.track(res.Label(), t, r.o.Duration)
	begin := time.Now()
	end = begin.Add(r.o.Duration)
	close(start)
	done.Wait()
	res.Elapsed = time.Since(begin)
	stop()
	t.into(res)
	res.Latency = rec.r
	return []*Result{res}
}

// baton is S3's record of the last holder, read and written while holding
// the lock (for the kinds that admit one holder).
type baton struct {
	mu       sync.Mutex
	last     int       // client of the last holding, -1 before the first
	relStart time.Time // when it called Release
	fence    uint64    // the highest fence granted so far
	rec      Recorder  // hand-overs
	switches int64
}

// s3: --clients independent connections contend for one name with a
// blocking Lock, each holding it for --hold of busy work.
func (r *runner) s3(ctx context.Context) []*Result {
	n, name := r.o.Clients, r.o.name("S3")
	excl := exclusive(r.o.Kind)
	res := &Result{ID: "S3", Measures: MeasureHandOver, Checked: r.o.Kind != backend.KindRead,
		Description: fmt.Sprintf("contended hand-over, %d clients on 1 lock, hold %v", n, r.o.Hold)}
	if !excl {
		res.Measures = MeasureWait
		res.Description = fmt.Sprintf("contended wait, %d clients on 1 %s lock, hold %v", n, r.o.Kind, r.o.Hold)
	}
	targets, err := r.connectClients(ctx, n)
	defer func() {
		for _, t := range targets {
			t.Close()
		}
	}()
	if err != nil {
		return r.failed(res, err)
	}
	lockers := make([]dlock.Locker, n)
	for i, tg := range targets {
		if lockers[i], err = tg.Locker(name, r.lockOptions()); err != nil {
			return r.failed(res, err)
		}
	}
	t := &tally{}
	// Warm-up: every client takes and releases the lock once, in turn.
	for i, l := range lockers {
		wctx, cancel := context.WithTimeout(ctx, r.o.TTL+lockWaitSlack)
		lease, err := l.Lock(wctx)
		cancel()
		if err == nil {
			err = release(lease)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return r.failed(res, fmt.Errorf("client %d: warm-up on %q: %w", i, name, err))
		}
	}

	limit := int64(0) // holders admitted at once; 0: not checked
	switch {
	case r.o.Kind == backend.KindSemaphore:
		limit = int64(r.o.Permits)
	case excl:
		limit = 1
	}
	var (
		holders, most atomic.Int64
		b             = baton{last: -1}
		wait          syncRecorder
		per           = make([]int64, n)
		wg            sync.WaitGroup
	)
	stop := r.prog.track(res.Label(), t, r.o.Duration)
	start := time.Now()
	end := start.Add(r.o.Duration)
	lctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	for id, l := range lockers {
		wg.Go(func() {
			w := newBatcher(&wait)
			defer w.flush()
			// The deadline check stops a client whose Lock failed because
			// a transport saw the deadline pass before lctx.Err was set.
			for lctx.Err() == nil && time.Now().Before(end) {
				t0 := time.Now()
				lease, err := l.Lock(lctx)
				acquired := time.Now()
				if err != nil {
					if lctx.Err() == nil && acquired.Before(end) {
						t.fail(fmt.Errorf("client %d: Lock %q: %w", id, name, err))
						pause(lctx, end)
					}
					continue
				}
				h := holders.Add(1)
				if limit > 0 && h > limit {
					t.overlaps.Add(1)
				}
				for m := most.Load(); h > m && !most.CompareAndSwap(m, h); m = most.Load() {
				}
				w.record(acquired.Sub(t0))
				if excl {
					fence := lease.Fence()
					b.mu.Lock()
					if b.last >= 0 && b.last != id {
						b.rec.Record(acquired.Sub(b.relStart))
						b.switches++
					}
					if fence <= b.fence {
						t.regressed(name, fence, b.fence)
					}
					b.fence = max(b.fence, fence)
					b.mu.Unlock()
				}
				spin(r.o.Hold)
				if excl {
					b.mu.Lock()
					b.last, b.relStart = id, time.Now()
					b.mu.Unlock()
				}
				holders.Add(-1)
				if err := release(lease); err != nil {
					t.fail(fmt.Errorf("client %d: Release %q: %w", id, name, err))
				}
				per[id]++
				t.ops.Add(1)
			}
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	stop()
	t.into(res)
	c := &Contention{Clients: n, Wait: wait.r, MaxHolders: most.Load(), Switches: b.switches}
	if total := res.Ops; total > 0 {
		fair := float64(total) / float64(n)
		c.ShareMin, c.ShareMax = float64(slices.Min(per))/fair, float64(slices.Max(per))/fair
	}
	res.Contention = c
	if excl {
		res.Latency = b.rec
	} else {
		res.Latency = wait.r
	}
	return []*Result{res}
}

// connectClients connects n independent clients to the deployment, at once.
func (r *runner) connectClients(ctx context.Context, n int) ([]*backend.Target, error) {
	targets := make([]*backend.Target, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, ConnectTimeout)
			defer cancel()
			targets[i], errs[i] = backend.Connect(cctx, r.spec, nil)
		})
	}
	wg.Wait()
	targets = slices.DeleteFunc(targets, func(t *backend.Target) bool { return t == nil })
	if err := errors.Join(errs...); err != nil {
		return targets, fmt.Errorf("connecting %d clients: %w", n, err)
	}
	return targets, nil
}

// s4: S1 through each server of the deployment alone.
func (r *runner) s4(ctx context.Context) []*Result {
	nodes := r.spec.Nodes()
	if len(nodes) == 0 {
		return nil
	}
	per := max(r.o.Duration/time.Duration(len(nodes)), s4MinPerNode)
	var out []*Result
	for i, n := range nodes {
		if ctx.Err() != nil {
			break
		}
		res := &Result{ID: "S4", Node: n.Addr, Measures: MeasureCycle,
			Description: fmt.Sprintf("S1 through node %d of %d alone", i+1, len(nodes))}
		if len(nodes) == 1 {
			res.Description = "S1 through the only server"
		}
		out = append(out, r.node(ctx, res, n.Spec, r.o.name("S4", strconv.Itoa(i)), per))
	}
	return out
}

// node runs S1 for d on a connection of its own to the one server spec names.
func (r *runner) node(ctx context.Context, res *Result, spec backend.Spec, name string, d time.Duration) *Result {
	cctx, cancel := context.WithTimeout(ctx, nodeConnect)
	t, err := backend.Connect(cctx, spec, nil)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return res
		}
		r.failed(res, fmt.Errorf("cannot reach %s: %w", res.Node, err))
		return res
	}
	defer t.Close()
	l, err := t.Locker(name, r.lockOptions()) // on Redlock, --kind mutex: a master alone, as Redlock uses it
	if err != nil {
		r.failed(res, err)
		return res
	}
	r.serial(ctx, res, l, name, d)
	return res
}

// failed records err as the only result of a scenario that could not run.
func (r *runner) failed(res *Result, err error) []*Result {
	t := &tally{}
	t.fail(err)
	t.into(res)
	return []*Result{res}
}

// spin busy-waits for d: a holder's fixed work, exact even below the timer
// resolution.
func spin(d time.Duration) {
	if d <= 0 {
		return
	}
	for start := time.Now(); time.Since(start) < d; {
	}
}
