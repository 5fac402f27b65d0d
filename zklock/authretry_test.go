package zklock_test

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/zklock"
)

// New with digest credentials rides out a connection that closes while it
// authenticates: go-zookeeper connects again, and the credentials are sent
// again until ctx ends. It failed at once with "digest authentication …:
// zk: connection closed" (a chaos zk3/tls client, under load).
func TestIntegrationDigestAuthThroughResets(t *testing.T) {
	t.Parallel()
	z := sharedZK(t)
	const rounds = 30
	failed := 0
	for range rounds {
		p := testenv.StartProxy(t, z.Addr())
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
					p.Reset()
				}
			}
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		// The resets stop after a while, as a flaky network heals.
		time.AfterFunc(3*time.Second, func() { close(stop) })
		c, err := zklock.New(ctx, []string{p.Addr()}, zklock.WithSessionTimeout(testSessionTimeout), zklock.WithDigestAuth("app", "s3cret"))
		cancel()
		if err != nil {
			failed++
			t.Logf("New through resets: %v", err)
			continue
		}
		c.Close()
	}
	if failed > 0 {
		t.Fatalf("%d of %d News with digest credentials failed while the connection was reset", failed, rounds)
	}
}
