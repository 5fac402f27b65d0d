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
	t.Parallel() // mostly waits, on servers of its own: see TestIntegrationConformance
	for _, n := range []int{3, 1} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			servers := testenv.StartRedisN(t, n, testenv.RedisConfig{})
			age(t, servers)
			addrs := addrsOf(servers)
			options := func(o dlocktest.Options) []redlock.Option {
				opts := []redlock.Option{redlock.WithTTL(o.TTL)}
				if o.NoRenewal {
					opts = append(opts, redlock.WithoutRenewal())
				}
				return opts
			}
			// The node timeout: see backend.
			clientOptions := func(o dlocktest.Options) []redlock.ClientOption {
				return []redlock.ClientOption{redlock.WithNodeTimeout(250 * time.Millisecond), redlock.WithRestartWindow(o.TTL)}
			}
			dlocktest.RunElection(t, dlocktest.ElectionBackend{
				NewElection: func(t testing.TB, name string, o dlocktest.Options) dlock.Election {
					return newClient(t, addrs, transports[0].open, clientOptions(o)...).NewElection(name, options(o)...)
				},
				CutOff: func(t testing.TB, name string, o dlocktest.Options) (dlock.Election, func()) {
					proxies := make([]*testenv.Proxy, len(addrs))
					via := make([]string, len(addrs))
					for i, a := range addrs {
						proxies[i] = testenv.StartProxy(t, a)
						via[i] = proxies[i].Addr()
					}
					e := newClient(t, via, transports[0].open, clientOptions(o)...).NewElection(name, options(o)...)
					return e, func() {
						for _, p := range proxies {
							p.Blackhole(true)
							t.Cleanup(func() { p.Blackhole(false); p.Reset() })
						}
					}
				},
				// The lock key's expiry on each node, by the node's clock
				// (see NewElection).
				LeaderHorizon: dlock.Drift(dlocktest.ElectionTTL),
				Handover:      500 * time.Millisecond, // DefaultRetry's longest sleep
			})
		})
	}
}
