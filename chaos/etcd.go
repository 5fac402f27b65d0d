package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/servers"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// An etcd cluster of three: etcdlock.Mutex. A member restarted without
// its data could not rejoin: no kill-empty.
var _ = register(&service{
	backends: []string{BackendEtcd3},
	client:   "etcd",
	needs:    "etcd", pkg: "etcd-server", look: lookEtcd,
	start: startEtcd,
	connect: func(c *client, _ context.Context, opTimeout time.Duration) (dlock.Locker, func(), error) {
		return c.connectEtcd(opTimeout)
	},
	faults: map[string][]string{BackendEtcd3: {FaultLeaderKill, FaultLeaderPauseKill, FaultClientPause, FaultPartition,
		FaultKill, FaultPause, FaultBlackhole, FaultLatency, FaultReset}},
	injects: map[string]injectFunc{FaultLeaderPauseKill: injectLeaderPauseKill},
	leader:  etcdLeader,
})

// lookEtcd returns an error if etcd is not installed.
func lookEtcd() error {
	_, err := servers.LookEtcd()
	return err
}

// etcdCluster returns the etcd cluster of d.
func etcdCluster(d *deployment) *servers.EtcdCluster { return d.state.(*servers.EtcdCluster) }

// startEtcd starts a cluster of three etcd members.
func startEtcd(d *deployment, _ int) error {
	if err := lookEtcd(); err != nil {
		return err
	}
	c, err := servers.LaunchEtcdCluster(3)
	if err != nil {
		return err
	}
	d.state = c
	d.closers = append(d.closers, c.Close) // resumes a paused member
	for _, m := range c.Members {
		d.nodes = append(d.nodes, node{addr: m.Addr(), proc: m})
	}
	return nil
}

// connectEtcd makes the client's etcdlock Mutex, through its proxies to
// every member.
func (c *client) connectEtcd(opTimeout time.Duration) (dlock.Locker, func(), error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.cfg.Addrs,
		DialTimeout: opTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, nil, err
	}
	locks := etcdlock.New(cli, etcdlock.WithObserver(c))
	closeAll := func() {
		locks.Close()
		cli.Close()
	}
	return locks.NewMutex("dlock-chaos/"+c.cfg.Name, etcdlock.WithTTL(c.cfg.TTL)), closeAll, nil
}

// etcdLeader returns the index of the etcd cluster's leader.
func etcdLeader(d *deployment) (int, error) {
	c := etcdCluster(d)
	l, err := c.Leader()
	if err != nil {
		return 0, err
	}
	for i, m := range c.Members {
		if m == l {
			return i, nil
		}
	}
	return 0, errors.New("chaos: the etcd leader is not a member")
}

// injectLeaderPauseKill plans FaultLeaderPauseKill on the holder and the
// leader.
func injectLeaderPauseKill(in *injector, ctx context.Context, f *injection) error {
	in.awaitHolder(ctx)
	c := in.victim()
	i, err := etcdLeader(in.d)
	if err != nil {
		return err
	}
	f.node, f.target = i, fmt.Sprintf("%s, the leader, with client %d pinned to it", in.d.name(i), c+1)
	f.hold = in.between(0, in.ttl)
	f.apply, f.heal = in.pauseKill(ctx, c, i)
	return nil
}

// pauseKill returns FaultLeaderPauseKill's apply and heal for client c
// and leader i. apply pins c to the leader (its proxies to the other
// members refuse and reset connections, so its client has only the
// leader's endpoint), waits up to a renewal period so that the pause falls
// anywhere in it, pauses the leader for half a TTL but at least 2s (past
// an election, and past a renewal sent to it), resumes it and kills it
// 10ms later: a leader that answers a queued renewal from its own lease
// table before it learns that it was deposed, and is then gone. heal
// restarts it and unpins c.
func (in *injector) pauseKill(ctx context.Context, c, i int) (apply, heal func() error) {
	s := in.d.server(i)
	var others []*servers.Proxy
	for j, p := range in.d.proxies[c] {
		if j != i {
			others = append(others, p)
		}
	}
	apply = func() error {
		for _, p := range others {
			p.SetRefuse(true)
			p.Reset()
		}
		sleep(ctx, in.between(0, in.ttl/3))
		if err := s.Pause(); err != nil {
			return err
		}
		sleep(context.WithoutCancel(ctx), max(in.ttl/2, 2*time.Second))
		if err := s.Resume(); err != nil {
			return err
		}
		time.Sleep(10 * time.Millisecond)
		return s.Kill()
	}
	heal = func() error {
		err := s.Restart() // resumes it first if apply stopped between
		for _, p := range others {
			p.SetRefuse(false)
		}
		return err
	}
	return apply, heal
}
