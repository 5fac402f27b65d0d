package etcdlock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/dlock-go/dlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func Example() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{etcdServer.Addr()}, // "127.0.0.1:2379", ...
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()
	locks := etcdlock.New(cli)
	defer locks.Close()

	lease, err := locks.NewMutex("locks/nightly-report", etcdlock.WithTTL(10*time.Second)).Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer lease.Release(ctx)
	// Pass lease.Fence() to what the lock protects; stop when lease.Done() closes.
	fmt.Println("held", lease.Key(), lease.Fence() > 0)
	// Output: held locks/nightly-report true
}
