package testenv

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

const (
	clusterSlots   = 16384
	clusterTimeout = 20 * time.Second
)

// A Cluster is a Redis Cluster of masters without replicas, all on
// 127.0.0.1. The slots are split evenly: node i owns the i-th of
// len(Nodes) consecutive ranges.
type Cluster struct {
	Nodes []*Redis
}

// LaunchCluster starts a Redis Cluster of the given number of masters,
// each in its own directory, assigns the slots evenly, joins the nodes
// and waits until every node reports cluster_state:ok and all nodes agree
// on the owner of every slot. The caller must Close the returned Cluster.
func LaunchCluster(masters int) (*Cluster, error) {
	if masters < 3 {
		return nil, fmt.Errorf("testenv: a cluster needs at least 3 masters, got %d", masters)
	}
	if masters > clusterSlots {
		return nil, fmt.Errorf("testenv: a cluster can have at most %d masters, got %d", clusterSlots, masters)
	}
	c := &Cluster{}
	cfg := RedisConfig{Args: []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", "2000",
	}}
	for range masters {
		r, err := launch(cfg, true)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Nodes = append(c.Nodes, r)
	}
	if err := c.form(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// slotRange returns the first and last slot of node i of n.
func slotRange(i, n int) (first, last int) {
	return i * clusterSlots / n, (i+1)*clusterSlots/n - 1
}

// form assigns the slots, introduces every node to node 0 and waits for
// the cluster to converge.
func (c *Cluster) form() error {
	n := len(c.Nodes)
	for i, r := range c.Nodes {
		first, last := slotRange(i, n)
		if _, err := r.Do("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(first), strconv.Itoa(last)); err != nil {
			return fmt.Errorf("testenv: CLUSTER ADDSLOTSRANGE on %s: %w", r.Addr(), err)
		}
		// Distinct epochs spare the nodes a round of collision handling.
		if _, err := r.Do("CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return fmt.Errorf("testenv: CLUSTER SET-CONFIG-EPOCH on %s: %w", r.Addr(), err)
		}
	}
	seed := c.Nodes[0]
	for _, r := range c.Nodes[1:] {
		if _, err := r.Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(seed.port), strconv.Itoa(seed.busPort)); err != nil {
			return fmt.Errorf("testenv: CLUSTER MEET on %s: %w", r.Addr(), err)
		}
	}
	deadline := time.Now().Add(clusterTimeout)
	for {
		err := c.check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testenv: cluster did not converge within %v: %w", clusterTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// check reports why the cluster is not yet healthy and consistent, or nil.
func (c *Cluster) check() error {
	var want string
	for _, r := range c.Nodes {
		info, err := r.Do("CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("CLUSTER INFO on %s: %w", r.Addr(), err)
		}
		for key, value := range map[string]string{
			"cluster_state":          "ok",
			"cluster_slots_assigned": strconv.Itoa(clusterSlots),
			"cluster_slots_ok":       strconv.Itoa(clusterSlots),
			"cluster_known_nodes":    strconv.Itoa(len(c.Nodes)),
		} {
			if got := infoField(info, key); got != value {
				return fmt.Errorf("node %s reports %s:%s, want %s", r.Addr(), key, got, value)
			}
		}
		nodes, err := r.Do("CLUSTER", "NODES")
		if err != nil {
			return fmt.Errorf("CLUSTER NODES on %s: %w", r.Addr(), err)
		}
		view, err := clusterView(nodes)
		if err != nil {
			return fmt.Errorf("node %s: %w", r.Addr(), err)
		}
		if want == "" {
			want = view
		} else if view != want {
			return fmt.Errorf("node %s disagrees on the slot map:\n%s\nwant:\n%s", r.Addr(), view, want)
		}
	}
	return nil
}

// clusterView turns CLUSTER NODES output into a canonical description of
// the masters and their slots, and fails if a node is not a healthy,
// connected master.
func clusterView(nodes string) (string, error) {
	var lines []string
	for line := range strings.Lines(nodes) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) < 8 {
			return "", fmt.Errorf("malformed CLUSTER NODES line %q", line)
		}
		addr, _, _ := strings.Cut(f[1], ",")
		flags := strings.Split(f[2], ",")
		for _, bad := range []string{"fail", "fail?", "handshake", "noaddr"} {
			if slices.Contains(flags, bad) {
				return "", fmt.Errorf("node %s has flag %s", addr, bad)
			}
		}
		if !slices.Contains(flags, "master") {
			return "", fmt.Errorf("node %s is not a master", addr)
		}
		if f[7] != "connected" {
			return "", fmt.Errorf("link to node %s is %s", addr, f[7])
		}
		lines = append(lines, strings.Join(append([]string{f[0], addr}, f[8:]...), " "))
	}
	if len(lines) == 0 {
		return "", errors.New("CLUSTER NODES is empty")
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n"), nil
}

// Addrs returns the addresses of the nodes, in order.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Nodes))
	for i, r := range c.Nodes {
		addrs[i] = r.Addr()
	}
	return addrs
}

// Close closes every node. It is idempotent.
func (c *Cluster) Close() error {
	var errs []error
	for _, r := range c.Nodes {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

// StartCluster starts a cluster as LaunchCluster does and closes it when
// the test and its subtests complete. If the test has failed by then, the
// tail of each node's log is written with t.Log. StartCluster skips the
// test if redis-server is not installed (see RequireBinary) and fails it
// if the cluster does not come up.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	SkipIfShort(t, "needs a Redis Cluster")
	RequireBinary(t, "redis-server")
	c, err := LaunchCluster(masters)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, r := range c.Nodes {
			closeForTest(t, "redis-server", r)
		}
	})
	return c
}
