package redislock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/granttest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// A grant whose reply takes most of its lease to arrive is refreshed or
// given back, never returned short (see granttest.Check).
func TestIntegrationShortGrantNeverReturned(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	d := standalone(t)
	p := testenv.StartProxy(t, d.servers[0].Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ReadTimeout: 2 * ttl, WriteTimeout: 2 * ttl})
	t.Cleanup(func() { rdb.Close() })
	slow := redislock.New(goredisconn.New(rdb))
	t.Cleanup(func() { slow.Close() })
	fast := newClient(t, d, goRedis)
	granttest.Check(t, granttest.Case{
		Slow:  slow.NewMutex("short-grant", redislock.WithTTL(ttl)),
		Fast:  fast.NewMutex("short-grant", redislock.WithTTL(ttl)),
		TTL:   ttl,
		Delay: p.SetLatency,
	})
}
