package servers

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Replicating reports whether node i is a replica whose link to its
// master is up.
func (c *Cluster) Replicating(i int) bool {
	info, err := c.Nodes[i].Do("INFO", "replication")
	return err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up")
}

// HasReplica reports whether node i is a master with a replica online.
func (c *Cluster) HasReplica(i int) bool {
	info, err := c.Nodes[i].Do("INFO", "replication")
	return err == nil && strings.Contains(info, "role:master") && strings.Contains(info, "state=online")
}

// ID returns node i's cluster node ID.
func (c *Cluster) ID(i int) (string, error) {
	id, err := c.Nodes[i].Do("CLUSTER", "MYID")
	if err != nil {
		return "", fmt.Errorf("servers: CLUSTER MYID on %s: %w", c.Nodes[i].Addr(), err)
	}
	return id, nil
}

// Owner returns the node that more than half of the nodes that answer
// name as the master of slot, in their CLUSTER NODES.
func (c *Cluster) Owner(slot int) (int, error) {
	ids := map[string]int{}
	for i := range c.Nodes {
		if id, err := c.ID(i); err == nil {
			ids[id] = i
		}
	}
	votes := map[int]int{}
	for _, r := range c.Nodes {
		nodes, err := r.Do("CLUSTER", "NODES")
		if err != nil {
			continue
		}
		for line := range strings.Lines(nodes) {
			f := strings.Fields(line)
			if len(f) < 8 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
				continue
			}
			for _, rng := range f[8:] {
				first, last, ok := strings.Cut(rng, "-")
				if !ok {
					last = first
				}
				lo, err1 := strconv.Atoi(first)
				hi, err2 := strconv.Atoi(last)
				if i, known := ids[f[0]]; known && err1 == nil && err2 == nil && lo <= slot && slot <= hi {
					votes[i]++
				}
			}
		}
	}
	for i, n := range votes {
		if n > len(c.Nodes)/2 {
			return i, nil
		}
	}
	return 0, fmt.Errorf("servers: the nodes do not agree on the master of slot %d: %v", slot, votes)
}

// Partition cuts node i off from every other node, or heals the cut:
// while on, the cluster bus and replication between node i and the others
// carry nothing, both ways, but clients still reach every node. It needs a
// cluster started with ClusterConfig.Links.
func (c *Cluster) Partition(i int, on bool) error {
	if c.links == nil {
		return errors.New("servers: Partition needs a cluster started with ClusterConfig.Links")
	}
	if i < 0 || i >= len(c.Nodes) {
		return fmt.Errorf("servers: Partition of node %d of %d", i, len(c.Nodes))
	}
	for j, l := range c.links {
		if j == i {
			continue
		}
		for _, p := range []*Proxy{c.links[i].data, c.links[i].bus} {
			p.Cut(l.source, on)
		}
		for _, p := range []*Proxy{l.data, l.bus} {
			p.Cut(c.links[i].source, on)
		}
	}
	return nil
}

// MigrateSlot moves slot from the master that owns it to master to, as
// redis-cli --cluster reshard does: it marks the slot IMPORTING on to and
// MIGRATING on the owner, moves its keys one MIGRATE at a time with step
// between them (and before the first and after the last), so that clients
// meet the slot half-moved, then assigns the slot to to on every master.
func (c *Cluster) MigrateSlot(slot, to int, step time.Duration) error {
	from, err := c.Owner(slot)
	if err != nil {
		return err
	}
	if from == to {
		return fmt.Errorf("servers: slot %d is on node %d already", slot, to)
	}
	fromID, err := c.ID(from)
	if err != nil {
		return err
	}
	toID, err := c.ID(to)
	if err != nil {
		return err
	}
	src, dst := c.Nodes[from], c.Nodes[to]
	s := strconv.Itoa(slot)
	if _, err := dst.Do("CLUSTER", "SETSLOT", s, "IMPORTING", fromID); err != nil {
		return fmt.Errorf("servers: SETSLOT IMPORTING on %s: %w", dst.Addr(), err)
	}
	if _, err := src.Do("CLUSTER", "SETSLOT", s, "MIGRATING", toID); err != nil {
		return fmt.Errorf("servers: SETSLOT MIGRATING on %s: %w", src.Addr(), err)
	}
	time.Sleep(step)
	port, _ := c.announced(to)
	for {
		keys, err := src.Do("CLUSTER", "GETKEYSINSLOT", s, "1")
		if err != nil {
			return fmt.Errorf("servers: GETKEYSINSLOT on %s: %w", src.Addr(), err)
		}
		if keys == "" {
			break
		}
		// The target as the source reaches it: through its link, if any.
		if _, err := src.Do("MIGRATE", "127.0.0.1", port, "", "0", "2000", "KEYS", keys); err != nil {
			return fmt.Errorf("servers: MIGRATE %s from %s: %w", keys, src.Addr(), err)
		}
		time.Sleep(step)
	}
	// The target first, so that its new epoch spreads; then the source,
	// which would otherwise send clients to itself.
	for _, r := range []*Redis{dst, src} {
		if _, err := r.Do("CLUSTER", "SETSLOT", s, "NODE", toID); err != nil {
			return fmt.Errorf("servers: SETSLOT NODE on %s: %w", r.Addr(), err)
		}
	}
	for i, r := range c.Nodes {
		if i != from && i != to && c.isMaster(i) {
			r.Do("CLUSTER", "SETSLOT", s, "NODE", toID) // best effort: gossip spreads it anyway
		}
	}
	return nil
}

func (c *Cluster) isMaster(i int) bool {
	info, err := c.Nodes[i].Do("INFO", "replication")
	return err == nil && strings.Contains(info, "role:master")
}
