package etcdlock_test

import (
	"testing"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/etcdlock"
)

func TestIntegrationElection(t *testing.T) {
	endpoints := []string{sharedEtcd(t).Addr()}
	dlocktest.RunElection(t, dlocktest.ElectionBackend{
		NewElection: func(t testing.TB, name string, o dlocktest.Options) dlock.Election {
			opts := []etcdlock.Option{etcdlock.WithTTL(o.TTL)}
			if o.NoRenewal {
				opts = append(opts, etcdlock.WithoutRenewal())
			}
			return connect(t, endpoints).NewElection(lockName(name), opts...)
		},
	})
}
