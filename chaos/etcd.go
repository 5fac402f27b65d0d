package chaos

import (
	"errors"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/etcdlock"
	"github.com/dlock-go/dlock/internal/servers"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// startEtcd starts a cluster of three etcd members.
func (d *deployment) startEtcd() error {
	if _, err := servers.LookEtcd(); err != nil {
		return err
	}
	c, err := servers.LaunchEtcdCluster(3)
	if err != nil {
		return err
	}
	d.etcd = c
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
func (d *deployment) etcdLeader() (int, error) {
	l, err := d.etcd.Leader()
	if err != nil {
		return 0, err
	}
	for i, m := range d.etcd.Members {
		if m == l {
			return i, nil
		}
	}
	return 0, errors.New("chaos: the etcd leader is not a member")
}
