package redlock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redlock"
)

func TestIntegrationElection(t *testing.T) {
	for _, n := range []int{3, 1} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			servers := testenv.StartRedisN(t, n, testenv.RedisConfig{})
			age(t, servers)
			addrs := addrsOf(servers)
			dlocktest.RunElection(t, dlocktest.ElectionBackend{
				NewElection: func(t testing.TB, name string, o dlocktest.Options) dlock.Election {
					opts := []redlock.Option{redlock.WithTTL(o.TTL)}
					if o.NoRenewal {
						opts = append(opts, redlock.WithoutRenewal())
					}
					// The node timeout: see backend.
					return newClient(t, addrs, transports[0].open, redlock.WithNodeTimeout(250*time.Millisecond),
						redlock.WithRestartWindow(o.TTL)).NewElection(name, opts...)
				},
				Handover: 500 * time.Millisecond, // DefaultRetry's longest sleep
			})
		})
	}
}
