package main

import (
	"context"
	"testing"
	"time"

	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/exampletest"
	"github.com/dlock-go/dlock/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The etcd example runs against a real server named by DLOCK_ETCD: it
// takes the lock, works and releases it; run while another client holds
// the lock, it says so and returns.
func TestIntegrationEtcdlockExample(t *testing.T) {
	srv := testenv.StartEtcd(t)
	t.Setenv("DLOCK_ETCD", srv.Addr())
	exampletest.WantLogged(t, exampletest.RunMain(t, main), "generating the report with fence ")

	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Addr()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	locks := etcdlock.New(cli)
	defer locks.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	held, err := locks.NewMutex("locks/nightly-report").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the example returned: %v; want the lock released", err)
	}
	defer held.Release(ctx)
	exampletest.WantLogged(t, exampletest.RunMain(t, main), "another process holds locks/nightly-report")
}
