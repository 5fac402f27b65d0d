// go get github.com/dlock-go/dlock
// DLOCK_ZK=zk1:2181,zk2:2181,zk3:2181 go run .   (default: 127.0.0.1:2181)
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
	"github.com/dlock-go/dlock/zklock"
)

func main() {
	ctx := context.Background()
	servers := strings.Split(cmp.Or(os.Getenv("DLOCK_ZK"), "127.0.0.1:2181"), ",")
	// New waits for a session with the ensemble: bound the wait.
	connect, cancel := context.WithTimeout(ctx, 10*time.Second)
	locks, err := zklock.New(connect, servers, zklock.WithSessionTimeout(10*time.Second))
	cancel()
	if err != nil {
		log.Fatal(err) // no server took the session; the error ends with the last connection error
	}
	defer locks.Close() // one Client per process: it owns its connection and its ZooKeeper session

	// The lock is a path; dlock run and dlock inspect put a NAME without a leading / under /dlock/.
	lease, err := locks.NewMutex("/dlock/nightly-report").TryLock(ctx) // Lock(ctx) waits, first come first served
	if errors.Is(err, dlock.ErrNotObtained) {
		log.Print("another process holds /dlock/nightly-report")
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Release(context.Background())

	// Work under the lock, as in the quick start: stop when lease.Context() ends
	// (the session expired, or the node was deleted).
	if err := generateReport(lease.Context(), lease.Fence()); err != nil {
		log.Print(err)
	}
}

// generateReport stands for the work; fence goes with every write it makes.
func generateReport(ctx context.Context, fence uint64) error {
	log.Printf("generating the report with fence %d", fence)
	return ctx.Err()
}
