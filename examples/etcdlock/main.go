// go get github.com/dlock-go/dlock go.etcd.io/etcd/client/v3
// DLOCK_ETCD=etcd1:2379,etcd2:2379,etcd3:2379 go run .   (default: 127.0.0.1:2379)
package main

import (
	"cmp"
	"context"
	"errors"
	"log"
	"os"
	"strings"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func main() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   strings.Split(cmp.Or(os.Getenv("DLOCK_ETCD"), "127.0.0.1:2379"), ","),
		DialTimeout: 5 * time.Second,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()
	locks := etcdlock.New(cli) // never fails; the first error comes from the first Lock
	defer locks.Close()

	// The keys are locks/nightly-report/<lease ID>, as etcd's own concurrency.Mutex lays them out.
	m := locks.NewMutex("locks/nightly-report", etcdlock.WithTTL(10*time.Second))
	lease, err := m.TryLock(ctx) // Lock(ctx) waits, first come first served
	if errors.Is(err, dlock.ErrNotObtained) {
		log.Print("another process holds locks/nightly-report")
		return
	}
	if err != nil {
		log.Fatal(err) // no endpoint answered, or the user may not write the prefix
	}
	defer lease.Release(context.Background())

	// Work under the lock, as in the quick start: stop when lease.Context() ends.
	if err := generateReport(lease.Context(), lease.Fence()); err != nil {
		log.Print(err)
	}
}

// generateReport stands for the work; fence (the key's create revision) goes
// with every write it makes.
func generateReport(ctx context.Context, fence uint64) error {
	log.Printf("generating the report with fence %d", fence)
	return ctx.Err()
}
