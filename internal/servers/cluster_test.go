package servers

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitUntil polls ok every 50ms until it holds, or fails t after d.
func waitUntil(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
	}
}

// A master cut off from the others by Partition is failed over to its
// replica, though clients still reach it; healed, it rejoins as a replica.
// A slot moved by MigrateSlot takes its keys, with their TTLs, along.
func TestIntegrationClusterReplicasPartitionMigrate(t *testing.T) {
	t.Parallel()
	c := startClusterConfig(t, ClusterConfig{Masters: 3, Replicas: 1, NodeTimeout: time.Second, Links: true})
	if len(c.Nodes) != 6 {
		t.Fatalf("%d nodes; want 6", len(c.Nodes))
	}
	for i := 3; i < 6; i++ {
		if !c.Replicating(i) {
			t.Fatalf("node %d is not replicating", i)
		}
	}
	if owner, err := c.Owner(0); err != nil || owner != 0 {
		t.Fatalf("Owner(0) = %d, %v; want 0", owner, err)
	}
	if slots, err := c.Nodes[1].Do("CLUSTER", "SLOTS"); err != nil || !strings.Contains(slots, c.Announced(0)[len("127.0.0.1:"):]) {
		t.Fatalf("CLUSTER SLOTS = %q, %v; want node 0's link port %s", slots, err, c.Announced(0))
	}

	if err := c.Partition(0, true); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "node 0's replica takes slot 0 over", func() bool {
		owner, err := c.Owner(0)
		return err == nil && owner == 3
	})
	if got, err := c.Nodes[0].Do("PING"); err != nil || got != "PONG" {
		t.Fatalf("a client cannot reach the partitioned node: %q, %v", got, err)
	}
	if err := c.Partition(0, false); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "node 0 rejoins as a replica", func() bool { return c.Replicating(0) })

	const key = "{migrating}k"
	s, err := c.Nodes[0].Do("CLUSTER", "KEYSLOT", key)
	if err != nil {
		t.Fatal(err)
	}
	slot, _ := strconv.Atoi(s)
	from, err := c.Owner(slot)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Nodes[from].Do("SET", key, "v", "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	to := 1
	if from == 1 {
		to = 2
	}
	if err := c.MigrateSlot(slot, to, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Nodes[to].Do("GET", key); err != nil || got != "v" {
		t.Fatalf("GET on the new owner = %q, %v; want v", got, err)
	}
	if ttl, err := c.Nodes[to].Do("PTTL", key); err != nil || ttl == "-1" || strings.HasPrefix(ttl, "-") {
		t.Fatalf("PTTL on the new owner = %q, %v; want the key's TTL", ttl, err)
	}
	if _, err := c.Nodes[from].Do("GET", key); err == nil || !strings.HasPrefix(err.Error(), "MOVED") {
		t.Fatalf("GET on the old owner: %v; want MOVED", err)
	}
	waitUntil(t, 10*time.Second, "every node names the new owner", func() bool {
		owner, err := c.Owner(slot)
		return err == nil && owner == to
	})
	if err := c.MigrateSlot(slot, to, 0); err == nil {
		t.Error("MigrateSlot to the owner succeeded")
	}
	plain := startCluster(t, 3)
	if err := plain.Partition(0, true); err == nil {
		t.Error("Partition of a cluster without links succeeded")
	}
}
