package etcdlock_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/testenv"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdServer is a standalone server that TestMain starts for the examples
// and the tests that inject no faults.
var etcdServer *testenv.Etcd

// sharedEtcd returns the shared server, and skips t under -short, when
// TestMain starts none.
func sharedEtcd(t testing.TB) *testenv.Etcd {
	t.Helper()
	testenv.SkipIfShort(t, "needs etcd")
	return etcdServer
}

// TestMain starts the shared server. Without etcd the package's tests are
// skipped with a message, or fail when CI is set.
func TestMain(m *testing.M) {
	if testenv.ShortMain() {
		os.Exit(m.Run())
	}
	if _, err := testenv.LookEtcd(); err != nil {
		fmt.Fprintln(os.Stderr, "SKIP etcdlock tests:", err)
		if ci := os.Getenv("CI"); ci == "true" || ci == "1" {
			os.Exit(1)
		}
		os.Exit(0)
	}
	e, err := testenv.LaunchEtcd()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	etcdServer = e
	code := m.Run()
	if err := testenv.StopAll(); err != nil {
		fmt.Fprintln(os.Stderr, "StopAll:", err)
		code = 1
	}
	os.Exit(code)
}

// dial opens an etcd client to endpoints, closed when t ends.
func dial(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("clientv3.New(%v): %v", endpoints, err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// connect returns an etcdlock Client on a client of its own to endpoints,
// both closed when t ends.
func connect(t testing.TB, endpoints []string, opts ...etcdlock.ClientOption) *etcdlock.Client {
	t.Helper()
	c := etcdlock.New(dial(t, endpoints...), opts...)
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// keys lists the keys under prefix.
func keys(t testing.TB, cli *clientv3.Client, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("Get %s: %v", prefix, err)
	}
	var ks []string
	for _, kv := range resp.Kvs {
		ks = append(ks, string(kv.Key))
	}
	return ks
}

// ctxFor returns a context that ends after d or with t.
func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
