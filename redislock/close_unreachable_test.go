package redislock_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// A call that could not even connect sent nothing, so it leaves nothing
// to clean up: Close after a TryLock on a server that refuses connections
// returns at once, without error (it waited five seconds for a clean-up
// that could not reach the server). rueidis dials when its client is made,
// so this is go-redis's case.
func TestCloseAfterRefusedConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // the port now refuses connections
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	c := redislock.New(goredisconn.New(rdb))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, l := range []dlock.Locker{c.NewMutex("refused"), c.NewFairMutex("refused-fair"), c.NewRWMutex("refused-rw").Writer(), c.NewReentrantMutex("refused-re")} {
		if _, err := l.TryLock(ctx); err == nil || errors.Is(err, dlock.ErrNotObtained) {
			t.Fatalf("TryLock on a refusing port: %v; want the connection's error", err)
		}
	}
	start := time.Now()
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v; want nil, nothing having been sent", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %v; want it at once, nothing having been sent", took)
	}
}
