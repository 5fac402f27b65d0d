package zklock_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/zklock"
)

// A lease released while a confirmation of it is in flight says it was
// released: the confirmation may find the node gone after the release
// deleted it, and must not end the lease as lost (issue 17).
func TestIntegrationReleaseDuringRenewal(t *testing.T) {
	ctx := ctxFor(t, 2*time.Minute)
	servers := []string{sharedZK(t).Addr()}
	s := connect(t, servers)
	const holders, rounds = 16, 400
	ttl := 60 * time.Millisecond // confirmed every 20ms
	errs := make(chan error, holders*rounds)
	var expired int
	done := make(chan int, holders)
	for h := range holders {
		m := s.NewMutex(fmt.Sprintf("%s-%d", uniquePath(t), h), zklock.WithTTL(ttl))
		go func() {
			n := 0
			for r := range rounds {
				lease, err := m.Lock(ctx)
				if err != nil {
					errs <- fmt.Errorf("Lock: %w", err)
					continue
				}
				// Release around the first confirmation, at TTL/3.
				time.Sleep(ttl/3 + time.Duration(r%8-4)*time.Millisecond)
				switch err := lease.Release(ctx); {
				case errors.Is(err, dlock.ErrExpired):
					n++ // no confirmation got through in 2/3 of the TTL: a loaded machine
				case errors.Is(err, dlock.ErrUnavailable):
					// The delete got no answer in its bound (a loaded
					// machine): not this test's subject, as long as the
					// lease ended as released (see dlock.Lease).
					n++
					if lease.Err() != dlock.ErrReleased {
						errs <- fmt.Errorf("Release() = %v, and Err() = %w", err, lease.Err())
					}
				case err != nil:
					errs <- fmt.Errorf("Release: %w", err)
				case lease.Err() != dlock.ErrReleased:
					errs <- fmt.Errorf("Release() == nil, but Err() = %w", lease.Err())
				}
			}
			done <- n
		}()
	}
	for range holders {
		expired += <-done
	}
	close(errs)
	bad := 0
	for err := range errs {
		if bad++; bad <= 3 {
			t.Error(err)
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d releases went wrong", bad, holders*rounds)
	}
	if expired > holders*rounds/2 {
		t.Errorf("%d of %d leases expired before their release, or their release got no answer: the test could not check its subject", expired, holders*rounds)
	}
}
