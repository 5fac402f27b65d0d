package lease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// The rule itself, on leases whose Refresh does not move Until (a refresh
// that got through too late): a short lease is given back and named; a
// long one, or one at its maximum hold, is kept. The backends' tests
// check it against real servers.
func TestFresh(t *testing.T) {
	const ttl = time.Hour
	for _, tc := range []struct {
		name  string
		left  time.Duration
		cap   bool
		short bool
	}{
		{"long", ttl / 2, false, false},
		{"just a third", ttl/3 + time.Minute, false, false},
		{"short", ttl / 10, false, true},
		{"short at its maximum hold", ttl / 10, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newTestLease(nil, tc.left)
			defer l.End(dlock.ErrReleased)
			if tc.cap {
				l.CapHold(l.Until())
			}
			err := Fresh(context.Background(), l, ttl)
			switch {
			case !tc.short && err != nil:
				t.Fatalf("Fresh = %v; want nil", err)
			case !tc.short && l.Err() != nil:
				t.Fatalf("Fresh ended the lease: %v", l.Err())
			case !tc.short:
				return
			case !errors.Is(err, dlock.ErrNotObtained) || !IsShort(err):
				t.Fatalf("Fresh = %v; want a short grant matching ErrNotObtained", err)
			case !strings.Contains(err.Error(), "granted with only ") || !strings.Contains(err.Error(), " of its 1h0m0s lease left") || !strings.Contains(err.Error(), "given back"):
				t.Errorf("Fresh = %q; want it to say how much was left and that it was given back", err)
			case l.Err() != dlock.ErrReleased:
				t.Errorf("the short lease's Err = %v; want ErrReleased", l.Err())
			}
		})
	}
}

func TestInterrupted(t *testing.T) {
	short := &shortGrantError{key: "k", left: 12 * time.Millisecond, ttl: time.Second}
	err := Interrupted(context.DeadlineExceeded, short)
	if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) || !IsShort(err) {
		t.Errorf("Interrupted after a short grant = %v; want ErrNotObtained, DeadlineExceeded and the short grant", err)
	}
	if !strings.Contains(err.Error(), "granted with only 12ms of its 1s lease left") {
		t.Errorf("Interrupted = %q; want the short grant named", err)
	}
	err = Interrupted(context.Canceled, dlock.ErrNotObtained)
	if !errors.Is(err, dlock.ErrNotObtained) || !errors.Is(err, context.Canceled) || IsShort(err) {
		t.Errorf("Interrupted after a busy lock = %v; want ErrNotObtained and Canceled alone", err)
	}
}
