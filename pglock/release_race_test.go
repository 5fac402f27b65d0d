package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/pglock"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// A raceTracer orders a renewal and a release of one lease, once it is
// armed: the renewal's statement waits, as it is sent, until the release
// has run in the database; the release's reply then waits until the
// renewal's reply has ended the lease. Each wait is bounded by raceWait,
// well within the lease's TTL, so that a design that serializes the two
// (session mode: one connection) only slows the test down.
type raceTracer struct {
	armed    atomic.Bool
	once     sync.Once
	renewing chan struct{} // closed when the renewal is being sent
	released chan struct{} // closed when the release has run
	settled  func() <-chan struct{}
	relOnce  sync.Once
}

type releaseKey struct{}

// raceWait bounds each of a raceTracer's waits.
const raceWait = 300 * time.Millisecond

func newRaceTracer() *raceTracer {
	return &raceTracer{renewing: make(chan struct{}), released: make(chan struct{})}
}

// pglock sends each of its round trips as a batch (a transaction of its
// own), so the tracer watches batches: a batch that notifies is the
// release, and the first other one once armed is the renewal.
func (r *raceTracer) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	if !r.armed.Load() || data.Batch == nil {
		return ctx
	}
	for _, q := range data.Batch.QueuedQueries {
		if strings.Contains(q.SQL, "pg_notify") {
			return context.WithValue(ctx, releaseKey{}, true)
		}
	}
	first := false
	r.once.Do(func() { first = true })
	if first {
		close(r.renewing)
		select {
		case <-r.released:
		case <-time.After(raceWait):
		}
	}
	return ctx
}

func (r *raceTracer) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *raceTracer) TraceBatchEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchEndData) {
	if ctx.Value(releaseKey{}) == nil {
		return
	}
	r.relOnce.Do(func() {
		close(r.released)
		select {
		case <-r.settled():
		case <-time.After(raceWait):
		}
	})
}

func (r *raceTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (r *raceTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// A renewal in flight when the holder releases, whose statement reaches
// the database after the release and finds the row freed, does not end
// the lease as lost: Release returns nil, Err is ErrReleased, and the
// observer sees a release and no loss. (In session mode the renewal and
// the release take turns on the lease's connection, so the renewal runs
// first; the test checks that this stays so.)
func TestIntegrationReleaseDuringRenewal(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			tracer := newRaceTracer()
			cfg, err := pgxpool.ParseConfig(sharedDB(t).URL())
			if err != nil {
				t.Fatal(err)
			}
			cfg.ConnConfig.Tracer = tracer
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			var mu sync.Mutex
			var events []dlock.Event
			c := pglock.New(pool, pglock.WithObserver(dlock.ObserverFunc(func(e dlock.Event) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			})))
			t.Cleanup(func() { c.Close() })
			ctx := ctxFor(t, time.Minute)
			lease, err := m.newLocker(c, unique("release-race"), pglock.WithTTL(3*time.Second)).Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			tracer.settled = lease.Done
			tracer.armed.Store(true)
			select {
			case <-tracer.renewing:
			case <-time.After(5 * time.Second):
				t.Fatal("no renewal within 5s of a 3s lease")
			}
			if err := lease.Release(ctx); err != nil {
				t.Errorf("Release: %v", err)
			}
			if err := lease.Err(); err != dlock.ErrReleased {
				t.Errorf("Err after Release = %v; want ErrReleased", err)
			}
			// The lease's end is reported once, maybe just after Release
			// returns: wait for it.
			var end *dlock.Event
			for deadline := time.Now().Add(5 * time.Second); end == nil && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				mu.Lock()
				for _, e := range events {
					if e.Kind == dlock.EventLost || e.Kind == dlock.EventReleased {
						end = &e
					}
				}
				mu.Unlock()
			}
			switch {
			case end == nil:
				t.Error("the observer was not told that the lease ended")
			case end.Kind == dlock.EventLost:
				t.Errorf("the observer was told the released lease was lost: %v", end.Err)
			}
		})
	}
}

// Many short leases, each released just as its renewal is due, all end
// as released: none says it was taken over (nobody else uses the names),
// and the observer hears of no such loss. A lease may still expire on a
// machine stalled past its TTL; that is a true loss, counted and logged,
// not a failure.
func TestIntegrationReleaseWhenRenewalDue(t *testing.T) {
	const (
		ttl     = 150 * time.Millisecond
		workers = 10
		rounds  = 100 // per worker
	)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel() // independent of the others: names (and proxy, or server) of its own
			var takenOver, expired, lostEvents atomic.Int64
			c := newClient(t, sharedDB(t).URL(), pglock.WithObserver(dlock.ObserverFunc(func(e dlock.Event) {
				if e.Kind == dlock.EventLost && errors.Is(e.Err, dlock.ErrTakenOver) {
					lostEvents.Add(1)
				}
			})))
			ctx := ctxFor(t, 2*time.Minute)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					l := m.newLocker(c, unique(fmt.Sprintf("renewal-due-%d", w)), pglock.WithTTL(ttl))
					for i := range rounds {
						lease, err := l.Lock(ctx)
						if err != nil {
							t.Error(err)
							return
						}
						// The first renewal is due at TTL/3: release
						// about then, a little before or after.
						time.Sleep(ttl/3 + time.Duration(i%7-3)*time.Millisecond)
						rerr := lease.Release(ctx)
						switch err := lease.Err(); {
						case errors.Is(err, dlock.ErrTakenOver):
							takenOver.Add(1)
							t.Logf("Release = %v; Err = %v", rerr, err)
						case errors.Is(err, dlock.ErrExpired),
							errors.Is(err, pglock.ErrSessionLost) && strings.Contains(err.Error(), "57P05"),
							errors.Is(err, pglock.ErrSessionLost) && errors.Is(err, context.DeadlineExceeded),
							errors.Is(err, pglock.ErrSessionLost) && strings.Contains(err.Error(), "conn closed"):
							// No renewal got through in time (the server's
							// idle_session_timeout, in session mode; or the
							// session's check timed out, and its connection
							// was closed to make sure the lock went): a stall.
							expired.Add(1)
						case err != dlock.ErrReleased:
							t.Errorf("Err after Release = %v (Release: %v)", err, rerr)
						}
					}
				})
			}
			wg.Wait()
			c.Close() // every event has been sent
			t.Logf("%d releases: %d ended as taken over, %d expired (a stalled machine), %d loss events for a take-over",
				workers*rounds, takenOver.Load(), expired.Load(), lostEvents.Load())
			if takenOver.Load() > 0 || lostEvents.Load() > 0 {
				t.Errorf("%d of %d released leases ended as taken over, and the observer heard of %d such losses",
					takenOver.Load(), workers*rounds, lostEvents.Load())
			}
		})
	}
}
