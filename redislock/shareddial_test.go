package redislock_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/rueidisconn"
	"github.com/redis/rueidis"
)

// TestIntegrationSharedDialCancelled: rueidis dials a connection once for
// all the calls waiting for it, with the context of the first, and gives
// them all that dial's error. A call whose own ctx is alive must not fail
// because another call's ctx ended during that dial (a Redlock release
// failed so in make test: "dial tcp …: operation was canceled").
func TestIntegrationSharedDialCancelled(t *testing.T) {
	t.Parallel()
	r := testenv.StartRedis(t, testenv.RedisConfig{})
	var slow atomic.Bool // the next dial waits for its ctx to end (or 2s)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.Addr()}, DisableCache: true,
		PipelineMultiplex: -1, // one connection, which every call shares
		DialCtxFn: func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			if slow.CompareAndSwap(true, false) {
				select {
				case <-ctx.Done():
				case <-time.After(2 * time.Second):
				}
			}
			return d.DialContext(ctx, "tcp", dst)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.Close)
	c := redislock.New(rueidisconn.New(rc))
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for round := range 3 {
		// Drop the client's connection until a call meets it dead (and
		// fails): rueidis dials again on the next call. (Had rueidis seen
		// it close first, the PING dialed again and succeeded.)
		for n := 0; ; n++ {
			if _, err := r.Do("CLIENT", "KILL", "TYPE", "normal"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
			if rc.Do(ctx, rc.B().Ping().Build()).Error() != nil {
				break
			}
			if n == 20 {
				t.Fatalf("round %d: PING after CLIENT KILL kept succeeding", round)
			}
		}
		slow.Store(true)
		first, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			_, err := c.NewMutex("same").TryLock(first)
			done <- err
		}()
		time.Sleep(20 * time.Millisecond) // the first call is dialing
		second := make(chan error, 1)
		go func() {
			l, err := c.NewMutex("same").TryLock(ctx)
			if err == nil {
				l.Release(ctx)
			}
			second <- err
		}()
		time.Sleep(20 * time.Millisecond) // the second call waits for that dial
		stop()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("round %d: the first TryLock, cancelled while dialing: %v; want context.Canceled", round, err)
		}
		if err := <-second; err != nil {
			t.Errorf("round %d: TryLock with a live ctx, beside one cancelled while dialing: %v", round, err)
		}
	}
}
