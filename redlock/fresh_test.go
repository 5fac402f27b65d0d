package redlock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock/internal/granttest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redlock"
)

// A grant whose replies take most of its lease to arrive is refreshed or
// given back, never returned short (see granttest.Check). The node timeout
// is above the slowed round trip, so that the slow nodes still vote.
func TestIntegrationShortGrantNeverReturned(t *testing.T) {
	t.Parallel() // mostly waits, on servers of its own: see TestIntegrationConformance
	const ttl = 2 * time.Second
	servers := testenv.StartRedisN(t, 3, testenv.RedisConfig{})
	age(t, servers)
	proxies := make([]*testenv.Proxy, len(servers))
	addrs := make([]string, len(servers))
	for i, s := range servers {
		proxies[i] = testenv.StartProxy(t, s.Addr())
		addrs[i] = proxies[i].Addr()
	}
	slow := newClient(t, addrs, rueidisClient, redlock.WithNodeTimeout(ttl*9/10))
	fast := newClient(t, addrsOf(servers), rueidisClient)
	granttest.Check(t, granttest.Case{
		Slow: slow.NewMutex("short-grant", redlock.WithTTL(ttl)),
		Fast: fast.NewMutex("short-grant", redlock.WithTTL(ttl)),
		TTL:  ttl,
		Delay: func(d time.Duration) {
			for _, p := range proxies {
				p.SetLatency(d)
			}
		},
	})
}
