package mysqllock_test

import (
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/dlocktest"
	"github.com/dlock-go/dlock/mysqllock"
)

func TestIntegrationElection(t *testing.T) {
	db := startDB(t)
	dlocktest.RunElection(t, dlocktest.ElectionBackend{
		NewElection: func(t testing.TB, name string, o dlocktest.Options) dlock.Election {
			opts := []mysqllock.Option{mysqllock.WithTTL(o.TTL)}
			if o.NoRenewal {
				opts = append(opts, mysqllock.WithoutRenewal())
			}
			return newClient(t, db.DSN()).NewElection(name, opts...)
		},
		Handover: 64 * time.Millisecond, // a campaign polls, at most DefaultRetry's longest sleep apart
	})
}
