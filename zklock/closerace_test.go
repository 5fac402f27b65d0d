package zklock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlock-go/dlock/zklock"
)

// TestIntegrationCloseDuringCalls closes Clients while calls are in
// flight on their connections. go-zookeeper returns a call at once when
// its connection closes, while it may still be decoding the reply into
// the call's result: the Client must not close a connection under its
// own calls (go test -race reports it if it does). The calls then end
// at once with ErrClosed: a call that met the closing connection used
// to retry it until its ctx ended.
func TestIntegrationCloseDuringCalls(t *testing.T) {
	if testing.Short() {
		t.Skip("needs ZooKeeper")
	}
	servers := []string{sharedZK(t).Addr()}
	base := uniquePath(t)
	for round := range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		s, err := zklock.New(ctx, servers, zklock.WithSessionTimeout(testSessionTimeout))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		errs := make(chan error, 16)
		var wg sync.WaitGroup
		for g := range cap(errs) {
			wg.Go(func() {
				for n := 0; ; n++ {
					// A fresh deep path: its parents are created too.
					path := fmt.Sprintf("%s/r%d/g%d/n%d/lock", base, round, g, n)
					l, err := s.NewMutex(path).TryLock(ctx)
					if err != nil {
						errs <- err
						return
					}
					l.Release(ctx)
				}
			})
		}
		time.Sleep(time.Duration(20+round*7) * time.Millisecond)
		if err := s.Close(); err != nil {
			t.Errorf("round %d: Close: %v", round, err)
		}
		closed := time.Now()
		wg.Wait()
		if d := time.Since(closed); d > 5*time.Second {
			t.Errorf("round %d: the calls under way took %v to return after Close", round, d)
		}
		close(errs)
		for err := range errs {
			if !errors.Is(err, zklock.ErrClosed) {
				t.Errorf("round %d: TryLock during Close: %v, want ErrClosed", round, err)
			}
		}
		cancel()
	}
}
