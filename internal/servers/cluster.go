package servers

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	clusterSlots   = 16384
	clusterTimeout = 60 * time.Second
)

// A Cluster is a Redis Cluster on 127.0.0.1: masters, each with the same
// number of replicas. The slots are split evenly: master i owns the i-th
// of Masters consecutive ranges at the start.
type Cluster struct {
	// Nodes are the masters as started, then their replicas: the k-th
	// replica of master i is Nodes[Masters + i*Replicas + k]. Failovers
	// change who is master; see Owner.
	Nodes []*Redis
	cfg   ClusterConfig
	links []nodeLinks // with ClusterConfig.Links, one per node
}

// nodeLinks are the proxies in front of one node's client port and
// cluster bus port, which the node announces as its address.
type nodeLinks struct {
	data, bus *Proxy
	source    string // the IP the node connects to the others from
}

// ClusterConfig describes a Redis Cluster to start with
// LaunchClusterConfig.
type ClusterConfig struct {
	// Masters is the number of masters, at least 3.
	Masters int
	// Replicas is the number of replicas of each master.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a node may not answer
	// before the others count it as failing and its replica takes over.
	// The default is two seconds.
	NodeTimeout time.Duration
	// Links puts two proxies in front of each node, for its client port
	// and its cluster bus port, and makes the node announce them as its
	// address and connect to the others from an address of its own
	// (127.0.0.2, 127.0.0.3, …): replication and the cluster bus then go
	// through the proxies, and Partition can cut a node off from the
	// others while clients still reach it. Clients that ask the cluster
	// for its nodes are given the link addresses.
	Links bool
}

// LaunchCluster starts a Redis Cluster of the given number of masters
// without replicas, as LaunchClusterConfig does.
func LaunchCluster(masters int) (*Cluster, error) {
	return LaunchClusterConfig(ClusterConfig{Masters: masters})
}

// LaunchClusterConfig starts the Redis Cluster described by cfg, each
// node in its own directory, assigns the slots evenly to the masters,
// joins the nodes, makes the replicas replicate their masters, and waits
// until every node reports cluster_state:ok, all nodes agree on the owner
// of every slot, and every replica's link to its master is up. The caller
// must Close the returned Cluster.
func LaunchClusterConfig(cfg ClusterConfig) (*Cluster, error) {
	if cfg.Masters < 3 {
		return nil, fmt.Errorf("servers: a cluster needs at least 3 masters, got %d", cfg.Masters)
	}
	if cfg.Masters > clusterSlots {
		return nil, fmt.Errorf("servers: a cluster can have at most %d masters, got %d", clusterSlots, cfg.Masters)
	}
	if cfg.Replicas < 0 || cfg.NodeTimeout < 0 || cfg.Masters*(1+cfg.Replicas) > 250 {
		return nil, fmt.Errorf("servers: a cluster of %d masters with %d replicas each and node timeout %v: want at most 250 nodes and no negative value",
			cfg.Masters, cfg.Replicas, cfg.NodeTimeout)
	}
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = 2 * time.Second
	}
	c := &Cluster{cfg: cfg}
	for i := range cfg.Masters * (1 + cfg.Replicas) {
		r, err := c.launchNode(i)
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

// launchNode starts node i, with its links if the cluster has them.
func (c *Cluster) launchNode(i int) (*Redis, error) {
	args := []string{
		"--cluster-enabled", "yes",
		"--cluster-config-file", "nodes.conf",
		"--cluster-node-timeout", strconv.FormatInt(c.cfg.NodeTimeout.Milliseconds(), 10),
	}
	if !c.cfg.Links {
		return launch(RedisConfig{Args: args}, true)
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	busPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	l := nodeLinks{source: fmt.Sprintf("127.0.0.%d", i+2)}
	if l.data, err = NewProxy(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
		return nil, err
	}
	c.links = append(c.links, l) // closed by Close, whatever happens next
	if l.bus, err = NewProxy(net.JoinHostPort("127.0.0.1", strconv.Itoa(busPort))); err != nil {
		return nil, err
	}
	c.links[i] = l
	args = append(args, "--cluster-port", strconv.Itoa(busPort),
		"--cluster-announce-ip", "127.0.0.1",
		"--cluster-announce-port", portOf(l.data.Addr()),
		"--cluster-announce-bus-port", portOf(l.bus.Addr()),
		"--bind-source-addr", l.source)
	return LaunchRedis(RedisConfig{Port: port, Args: args})
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}

// announced returns the client and bus addresses node i announces.
func (c *Cluster) announced(i int) (port, busPort string) {
	if c.links != nil {
		return portOf(c.links[i].data.Addr()), portOf(c.links[i].bus.Addr())
	}
	r := c.Nodes[i]
	return strconv.Itoa(r.port), strconv.Itoa(r.busPort)
}

// Announced returns the address node i gives clients, as CLUSTER SLOTS
// and MOVED replies name it: its link with ClusterConfig.Links, else
// its own.
func (c *Cluster) Announced(i int) string {
	port, _ := c.announced(i)
	return net.JoinHostPort("127.0.0.1", port)
}

// slotRange returns the first and last slot of node i of n.
func slotRange(i, n int) (first, last int) {
	return i * clusterSlots / n, (i+1)*clusterSlots/n - 1
}

// form assigns the slots, introduces every node to node 0, makes the
// replicas replicate and waits for the cluster to converge.
func (c *Cluster) form() error {
	m := c.cfg.Masters
	for i, r := range c.Nodes {
		if i < m {
			first, last := slotRange(i, m)
			if _, err := r.Do("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(first), strconv.Itoa(last)); err != nil {
				return fmt.Errorf("servers: CLUSTER ADDSLOTSRANGE on %s: %w", r.Addr(), err)
			}
		}
		// Distinct epochs spare the nodes a round of collision handling.
		if _, err := r.Do("CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return fmt.Errorf("servers: CLUSTER SET-CONFIG-EPOCH on %s: %w", r.Addr(), err)
		}
	}
	port, busPort := c.announced(0)
	for _, r := range c.Nodes[1:] {
		if _, err := r.Do("CLUSTER", "MEET", "127.0.0.1", port, busPort); err != nil {
			return fmt.Errorf("servers: CLUSTER MEET on %s: %w", r.Addr(), err)
		}
	}
	deadline := time.Now().Add(clusterTimeout)
	if c.cfg.Replicas > 0 {
		ids := make([]string, m)
		for i := range ids {
			var err error
			if ids[i], err = c.Nodes[i].Do("CLUSTER", "MYID"); err != nil {
				return fmt.Errorf("servers: CLUSTER MYID on %s: %w", c.Nodes[i].Addr(), err)
			}
		}
		for i, r := range c.Nodes[m:] {
			master := ids[i/c.cfg.Replicas]
			// A replica can follow a master once it knows it.
			for {
				_, err := r.Do("CLUSTER", "REPLICATE", master)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("servers: CLUSTER REPLICATE on %s: %w", r.Addr(), err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	for {
		err := c.check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("servers: cluster did not converge within %v: %w", clusterTimeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// check reports why the cluster is not yet healthy and consistent, or nil.
func (c *Cluster) check() error {
	var want string
	for i, r := range c.Nodes {
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
		if i >= c.cfg.Masters && !c.Replicating(i) {
			return fmt.Errorf("replica %s is not in sync with its master", r.Addr())
		}
	}
	return nil
}

// clusterView turns CLUSTER NODES output into a canonical description of
// the masters and their slots and the replicas and their masters, and
// fails if a node is not healthy and connected.
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
		if f[7] != "connected" {
			return "", fmt.Errorf("link to node %s is %s", addr, f[7])
		}
		switch {
		case slices.Contains(flags, "master"):
			lines = append(lines, strings.Join(append([]string{f[0], addr}, f[8:]...), " "))
		case slices.Contains(flags, "slave"):
			lines = append(lines, strings.Join([]string{f[0], addr, "replica of", f[3]}, " "))
		default:
			return "", fmt.Errorf("node %s is neither master nor replica", addr)
		}
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

// Close closes every node and link. It is idempotent.
func (c *Cluster) Close() error {
	var errs []error
	for _, r := range c.Nodes {
		r.Resume() // a paused server cannot be stopped gracefully
		errs = append(errs, r.Close())
	}
	for _, l := range c.links {
		for _, p := range []*Proxy{l.data, l.bus} {
			if p != nil {
				errs = append(errs, p.Close())
			}
		}
	}
	return errors.Join(errs...)
}
