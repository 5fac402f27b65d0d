package servers

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// An EtcdCluster is an etcd cluster of servers all on 127.0.0.1, named
// etcd1, etcd2, ... in order.
type EtcdCluster struct {
	Members []*Etcd
}

// LaunchEtcdCluster starts a cluster of n members, where n must be at
// least 1, and waits until every member is healthy and they agree on one
// leader. If the cluster does not form within about thirty seconds,
// LaunchEtcdCluster stops every member and returns an error that includes
// the tails of their logs. The caller must Close the returned cluster.
func LaunchEtcdCluster(n int) (*EtcdCluster, error) { return LaunchEtcdClusterWith("", n) }

// LaunchEtcdClusterWith is LaunchEtcdCluster with the etcd binary bin, such
// as BuildEtcd's; "" means Debian's.
func LaunchEtcdClusterWith(bin string, n int) (*EtcdCluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("servers: LaunchEtcdCluster: a cluster needs at least one member; got %d", n)
	}
	c := &EtcdCluster{}
	var initial []string
	for i := range n {
		e, err := newEtcd(fmt.Sprintf("etcd%d", i+1), bin)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Members = append(c.Members, e)
		initial = append(initial, e.member+"="+e.peerURL())
	}
	token := filepath.Base(c.Members[0].dir)
	for _, e := range c.Members {
		e.cluster = strings.Join(initial, ",")
		e.token = token
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, e := range c.Members { // no leader until a quorum is up: start all, then wait
		wg.Go(func() {
			e.mu.Lock()
			defer e.mu.Unlock()
			errs[i] = e.startAgainLocked(false)
		})
	}
	wg.Wait()
	for _, e := range c.Members {
		running.add(&e.daemon)
	}
	if err := errors.Join(errs...); err != nil {
		c.Close()
		return nil, err
	}
	if err := c.WaitHealthy(etcdStartTimeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Addrs returns the client addresses of the members, in order, as an etcd
// client takes them for its endpoints.
func (c *EtcdCluster) Addrs() []string {
	addrs := make([]string, len(c.Members))
	for i, e := range c.Members {
		addrs[i] = e.Addr()
	}
	return addrs
}

// Leader returns the member that is the cluster's leader, as the members
// that answer see it. It returns an error if none answers with a leader,
// or if they name different leaders, as during an election.
func (c *EtcdCluster) Leader() (*Etcd, error) {
	var leaderID uint64
	byID := make(map[uint64]*Etcd)
	for _, e := range c.Members {
		st, err := e.status()
		if err != nil {
			continue
		}
		byID[st.MemberID] = e
		if st.Leader == 0 {
			continue
		}
		if leaderID != 0 && st.Leader != leaderID {
			return nil, fmt.Errorf("servers: etcd members name two leaders, %x and %x", leaderID, st.Leader)
		}
		leaderID = st.Leader
	}
	if l, ok := byID[leaderID]; ok && leaderID != 0 {
		return l, nil
	}
	return nil, errors.New("servers: etcd cluster has no leader that answers")
}

// Followers returns the members other than the leader, as Leader finds it.
func (c *EtcdCluster) Followers() ([]*Etcd, error) {
	l, err := c.Leader()
	if err != nil {
		return nil, err
	}
	var fs []*Etcd
	for _, e := range c.Members {
		if e != l {
			fs = append(fs, e)
		}
	}
	return fs, nil
}

// WaitHealthy waits up to timeout until every member that is running
// answers /health with health true and all of them name one leader. A
// member that is not running (killed or stopped) is left out; a paused
// one makes WaitHealthy wait.
func (c *EtcdCluster) WaitHealthy(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := c.healthy()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			fmt.Fprintf(&b, "servers: etcd cluster not healthy within %v: %v", timeout, err)
			for _, e := range c.Members {
				fmt.Fprintf(&b, "\netcd %s log tail:\n%s", e.Addr(), e.LogTail(logTailLines))
			}
			return errors.New(b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// healthy returns nil if every running member is healthy and they agree
// on one leader.
func (c *EtcdCluster) healthy() error {
	var leader uint64
	for _, e := range c.Members {
		if e.PID() == 0 {
			continue
		}
		if err := e.health(); err != nil {
			return err
		}
		st, err := e.status()
		if err != nil {
			return err
		}
		if st.Leader == 0 || (leader != 0 && st.Leader != leader) {
			return fmt.Errorf("servers: etcd members disagree on the leader (%x, %x)", leader, st.Leader)
		}
		leader = st.Leader
	}
	return nil
}

// Restart stops every member (gracefully), starts them all again on the
// same ports and directories, and waits until the cluster is healthy. The
// data survives: like a restart of every machine.
func (c *EtcdCluster) Restart() error {
	if err := c.each((*Etcd).Stop); err != nil {
		return err
	}
	errs := make([]error, len(c.Members))
	var wg sync.WaitGroup
	for i, e := range c.Members {
		wg.Go(func() { errs[i] = e.locked("Restart", func() error { return e.startAgainLocked(false) }) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.WaitHealthy(etcdStartTimeout)
}

// Close stops every member and removes their directories. Close is
// idempotent.
func (c *EtcdCluster) Close() error { return c.each((*Etcd).Close) }

// each calls f on every member, one after the other: a leader told to stop
// while its followers stop too waits to hand its leadership over until it
// is killed, five seconds later; one at a time, each stops in a tenth of a
// second.
func (c *EtcdCluster) each(f func(*Etcd) error) error {
	var errs []error
	for _, e := range c.Members {
		errs = append(errs, f(e))
	}
	return errors.Join(errs...)
}
