package redislock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/internal/testenv"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/redis/go-redis/v9"
)

// replicated starts a master and one replica that has caught up with it.
// Replication runs through link, a fault proxy that can cut it.
func replicated(t *testing.T) (master, replica *testenv.Redis, link *testenv.Proxy) {
	master = testenv.StartRedis(t, testenv.RedisConfig{})
	link = testenv.StartProxy(t, master.Addr())
	_, port, _ := strings.Cut(link.Addr(), ":")
	replica = testenv.StartRedis(t, testenv.RedisConfig{Args: []string{"--replicaof", "127.0.0.1", port}})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if info, _ := replica.Do("INFO", "replication"); strings.Contains(info, "master_link_status:up") {
			return master, replica, link
		}
		if time.Now().After(deadline) {
			t.Fatal("replica did not connect to its master")
		}
	}
}

func clientAt(t *testing.T, addr string) *redislock.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	t.Cleanup(func() { rdb.Close() })
	c := redislock.New(goredisconn.New(rdb))
	t.Cleanup(func() { c.Close() })
	return c
}

// failover kills the master and promotes the replica, as an operator or
// Sentinel would.
func failover(t *testing.T, master, replica *testenv.Redis) {
	if err := master.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := replica.Do("REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
}

// The failover hole: a lock granted by a master that dies before
// replicating it is granted again by the promoted replica.
func TestIntegrationFailoverHoleWithoutReplicas(t *testing.T) {
	t.Parallel()
	master, replica, link := replicated(t)
	ctx := timeout(t, 10*time.Second)
	link.Blackhole(true) // the grant is never replicated
	a, err := clientAt(t, master.Addr()).NewMutex("failover").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	failover(t, master, replica)
	b, err := clientAt(t, replica.Addr()).NewMutex("failover").TryLock(ctx)
	if err != nil {
		t.Fatalf("the failover hole did not reproduce: %v", err)
	}
	t.Logf("without WithReplicas, two holders after a failover: fences %d and %d", a.Fence(), b.Fence())
}

// With WithReplicas the first grant succeeds only once replicated, so the
// promoted replica refuses a second holder.
func TestIntegrationWithReplicasClosesFailoverHole(t *testing.T) {
	t.Parallel()
	master, replica, link := replicated(t)
	ctx := timeout(t, 10*time.Second)
	m := clientAt(t, master.Addr()).NewMutex("failover", redislock.WithReplicas(1, 200*time.Millisecond))

	link.Blackhole(true)
	_, err := m.TryLock(ctx)
	if !errors.Is(err, dlock.ErrNotObtained) || !strings.Contains(err.Error(), "0 of the 1 replicas") {
		t.Fatalf("TryLock with the replica paused = %v; want not obtained for lack of replicas", err)
	}
	if out, _ := master.Do("EXISTS", lockKey("failover")); out != "0" {
		t.Error("an unreplicated lock was left on the master")
	}
	link.Blackhole(false)
	link.Reset() // the replica reconnects and resynchronises

	a, err := m.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock with the replica up: %v", err)
	}
	failover(t, master, replica)
	_, err = clientAt(t, replica.Addr()).NewMutex("failover").TryLock(ctx)
	if !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("after the failover, a second client got %v; want ErrNotObtained (A, fence %d, holds it)", err, a.Fence())
	}
}

// Behind a real Sentinel, a replicated lock survives an automatic failover.
func TestIntegrationWithReplicasThroughSentinelFailover(t *testing.T) {
	t.Parallel()
	master, replica, _ := replicated(t)
	sentinel := testenv.StartSentinel(t, master, "dlock-ha")
	failoverClient := func() *redislock.Client {
		rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "dlock-ha", SentinelAddrs: []string{sentinel.Addr()}})
		t.Cleanup(func() { rdb.Close() })
		c := redislock.New(goredisconn.New(rdb))
		t.Cleanup(func() { c.Close() })
		return c
	}
	ctx := timeout(t, 60*time.Second)
	// Sentinel needs a moment to discover the replica through the master.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, _ := sentinel.Do("SENTINEL", "REPLICAS", "dlock-ha")
		if strings.Contains(out, fmt.Sprint(replica.Port())) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Sentinel did not discover the replica")
		}
	}
	a, err := failoverClient().NewMutex("ha", redislock.WithTTL(time.Minute), redislock.WithReplicas(1, time.Second)).TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	master.Kill()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		out, _ := sentinel.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "dlock-ha")
		if strings.Contains(out, fmt.Sprint(replica.Port())) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Sentinel did not fail over to the replica")
		}
	}
	_, err = failoverClient().NewMutex("ha").TryLock(ctx)
	if !errors.Is(err, dlock.ErrNotObtained) {
		t.Fatalf("after the Sentinel failover a second client got %v; want ErrNotObtained (A, fence %d, holds it)", err, a.Fence())
	}
	_ = context.Background
}

func TestWithReplicasBadArguments(t *testing.T) {
	c := redislock.New(goredisconn.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})))
	for _, opt := range []redislock.Option{
		redislock.WithReplicas(-1, time.Second),
		redislock.WithReplicas(1, 0),
		redislock.WithReplicas(1, time.Hour),
	} {
		if _, err := c.NewMutex("x", opt).TryLock(context.Background()); err == nil || !strings.Contains(err.Error(), "WithReplicas") {
			t.Errorf("TryLock = %v; want an error naming WithReplicas", err)
		}
	}
}

// A Lock waits through a Redis Cluster failover: once the replica of the
// lock's slot is promoted, the next attempt goes to it. With go-redis, the
// Cluster client has to be told to reload its map of the slots (it does so
// by itself only for commands it may send again, and dlock's scripts are
// sent once): the attempts kept going to the dead master, and the Lock
// waited its whole 40s context after a failover that took 3s.
func TestIntegrationLockWaitsThroughClusterFailover(t *testing.T) {
	t.Parallel()
	cl := testenv.StartClusterConfig(t, testenv.ClusterConfig{Masters: 3, Replicas: 1})
	d := &deployment{servers: cl.Nodes, cluster: true}
	failed := map[int64]bool{} // the shards (by their first slot range) whose master was killed
	for _, tr := range transports {
		var name string
		var slot int64
		for i := 0; ; i++ { // a name on a shard that still has its replica
			name = fmt.Sprintf("cluster-failover-%s-%d", tr.name, i)
			var err error
			if slot, err = d.admin(t).ClusterKeySlot(context.Background(), lockKey(name)).Result(); err != nil {
				t.Fatal(err)
			}
			if !failed[slot*3/16384] {
				failed[slot*3/16384] = true
				break
			}
		}
		c := newClient(t, d, tr.open)
		l, err := c.NewMutex(name).Lock(timeout(t, 10*time.Second)) // the client knows the slot's master
		if err != nil {
			t.Fatal(err)
		}
		l.Release(context.Background())
		t.Run(tr.name, func(t *testing.T) {
			owner, err := cl.Owner(int(slot))
			if err != nil {
				t.Fatal(err)
			}
			if err := cl.Nodes[owner].Kill(); err != nil {
				t.Fatal(err)
			}
			killed := time.Now()
			l, err := c.NewMutex(name).Lock(timeout(t, 20*time.Second))
			if err != nil {
				t.Fatalf("Lock through the failover of its slot's master: %v", err)
			}
			t.Logf("measured: granted %v after the slot's master was killed", time.Since(killed).Round(time.Millisecond))
			l.Release(context.Background())
		})
	}
}
