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

// New with digest credentials whose session is given up while it
// authenticates (the network went silent past the session timeout, and the
// Client started a new session, which sent the credentials itself) returns
// the Client on the new session. It retried on the old, closed connection
// until ctx ended ("digest authentication …: zk: connection closed", 1 of
// 30 rounds of TestIntegrationDigestAuthThroughResets under load).
func TestIntegrationDigestAuthSessionReplaced(t *testing.T) {
	t.Parallel()
	z := sharedZK(t)
	p := testenv.StartProxy(t, z.Addr())
	p.SetLatency(150 * time.Millisecond)
	go func() {
		// Once the session is set up (the connect request answered and
		// the next request sent), drop everything past the session
		// timeout.
		for p.Requests() < 2 {
			time.Sleep(time.Millisecond)
		}
		p.Blackhole(true)
		time.Sleep(testSessionTimeout + 2*time.Second)
		p.SetLatency(0)
		p.Blackhole(false)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	c, err := zklock.New(ctx, []string{p.Addr()}, zklock.WithSessionTimeout(testSessionTimeout), zklock.WithDigestAuth("app", "s3cret"))
	if err != nil {
		t.Fatalf("New, its session given up while it authenticated: %v (after %v)", err, time.Since(start).Round(time.Millisecond))
	}
	defer c.Close()
	t.Logf("New returned after %v", time.Since(start).Round(time.Millisecond))
	lease, err := c.NewMutex("/auth-replaced").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock on the new session: %v", err)
	}
	if acl, _, err := c.Conn().GetACL("/auth-replaced"); err != nil || len(acl) != 1 || acl[0].Scheme != "digest" {
		t.Errorf("ACL of the lock path = %v, %v; want the digest user's only (the new session authenticated)", acl, err)
	}
	lease.Release(ctx)
}
