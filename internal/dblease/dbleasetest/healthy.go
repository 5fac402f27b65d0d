package dbleasetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// DeadlinesOnHealthy: Locks and TryLocks whose ctx deadlines (0 to span)
// land in the middle of their work, on a database that answers
// throughout, never say ErrUnavailable: the end of ctx is not the
// database's failure. Half wait behind a holder, half take a free lock;
// with dial, the latter do so on a Client of their own, and so dial the
// database as ctx ends (the dialer's timer, set for the same deadline as
// ctx's, may run first); the others on a Client whose connections are
// pooled, their statements interrupted. (A server whose interrupted
// connects linger, as PostgreSQL's, runs out of connections with dial.)
func DeadlinesOnHealthy(t *testing.T, db DB, rounds int, dial bool, span time.Duration) {
	for mode, modeName := range db.Modes {
		t.Run(modeName, func(t *testing.T) {
			t.Parallel() // the modes' locks have names of their own
			held := Unique("healthy-held")
			h, err := db.locker(t, mode, held, 0).Lock(Ctx(t, time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Release(Ctx(t, 10*time.Second))
			pooled := db.Client(t, db.Addr)
			free := Unique("healthy-free")
			counts := map[string]int{}
			for i := range rounds {
				d := time.Duration(rand.Int64N(int64(span)))
				c, name := pooled, held
				fresh := dial && i%2 == 1
				switch {
				case fresh:
					c, name = db.Client(t, db.Addr), free
				case i%2 == 1:
					name = free
				}
				l := c.Locker(mode, name, 0)
				ctx, cancel := context.WithTimeout(context.Background(), d)
				var got dlock.Lease
				what := "Lock"
				if i%4 >= 2 {
					what = "TryLock"
					got, err = l.TryLock(ctx)
				} else {
					got, err = l.Lock(ctx)
				}
				cancel()
				switch {
				case got != nil:
					counts[what+" got"]++
					if err := got.Release(Ctx(t, 10*time.Second)); err != nil {
						t.Errorf("Release: %v", err)
					}
				case errors.Is(err, dlock.ErrUnavailable):
					counts[what+" unavailable"]++
					t.Errorf("%s of %s with a %v deadline on a healthy database = %v; want no ErrUnavailable", what, name, d, err)
				case errors.Is(err, dlock.ErrNotObtained):
					counts[what+" not obtained"]++
				default:
					counts[what+" other"]++
					t.Errorf("%s of %s with a %v deadline = %v; want ErrNotObtained", what, name, d, err)
				}
				if fresh {
					c.Close()
				}
			}
			t.Logf("%v", counts)
		})
	}
}
