package lease

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
)

// Leases that expire together in one heap end each on its own goroutine:
// a lease whose end is slow (its backend's onEnd, or an observer, blocks)
// does not hold up the ends of the others.
func TestSlowEndDoesNotHoldUpOtherExpiries(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	until := time.Now().Add(50 * time.Millisecond)
	slow := New(context.Background(), nil, "slow", "t1", 1, until, func() { <-release })
	other := New(context.Background(), nil, "other", "t2", 2, until, nil)
	other.shard = slow.shard // one heap; slow is first in it
	slow.Start()
	other.Start()
	select {
	case <-other.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a lease due with one whose end blocks did not end 10s after its Until")
	}
}

// The expiry heap ends every lease at its deadline, in any order of
// deadlines, and after Extend at the new one; ended leases leave it.
func TestExpiryHeapOrder(t *testing.T) {
	start := time.Now()
	const n = 200
	states := make([]*State, n)
	for i := range states {
		until := start.Add(time.Duration(20+rand.IntN(200)) * time.Millisecond)
		states[i] = New(context.Background(), nil, fmt.Sprint(i), fmt.Sprint(i), uint64(i), until, nil)
		states[i].Start()
	}
	for i := 0; i < n; i += 4 { // a quarter moved later
		states[i].Extend(states[i].Until().Add(100 * time.Millisecond))
	}
	for i := 1; i < n; i += 4 { // a quarter released
		states[i].End(dlock.ErrReleased)
	}
	for i, s := range states {
		select {
		case <-s.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("lease %d not ended 10s after its Until", i)
		}
		if i%4 != 1 && time.Now().Before(s.Until()) {
			t.Errorf("lease %d ended before its Until", i)
		}
	}
	for i, s := range states {
		sh := &shards[s.shard]
		sh.mu.Lock()
		slot := s.slot
		sh.mu.Unlock()
		if slot != -1 {
			t.Errorf("lease %d is in its expiry heap after it ended (slot %d)", i, slot)
		}
	}
}
