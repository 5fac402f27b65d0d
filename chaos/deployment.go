package chaos

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/dlock-go/dlock/internal/servers"
)

// A deployment is the servers of one backend, started by the harness on
// loopback ports, and a proxy per client and server, through which the
// client reaches the server: the way to delay or cut one client or one
// server off.
type deployment struct {
	backend string
	redis   []*servers.Redis
	zk      *servers.Ensemble
	etcd    *servers.EtcdCluster
	pg      *servers.Postgres
	my      *servers.MariaDB
	cluster *servers.Cluster
	// With TLS: the certificates, and the TLS address of each Redis
	// server, which clients reach instead of its plain one.
	certs    *servers.Certs
	certsDir string
	tlsAddrs []string
	links    []*servers.Proxy   // Sentinel: in front of each data server, for replication and the Sentinels
	proxies  [][]*servers.Proxy // [client][server]
}

// startDeployment starts the servers of backend and the proxies of the
// given number of clients; with useTLS, servers that clients reach
// through TLS only (see TLSBackend).
func startDeployment(backend string, clients int, useTLS bool) (*deployment, error) {
	d := &deployment{backend: backend}
	var err error
	if useTLS {
		if err := d.startTLS(); err != nil {
			d.close()
			return nil, err
		}
	}
	switch backend {
	case BackendRedis, BackendRedisAOF:
		err = d.startRedis(1, servers.RedisConfig{Persistence: backend == BackendRedisAOF})
	case BackendRedlock3:
		err = d.startRedis(3, servers.RedisConfig{})
	case BackendRedlock3RDB:
		err = d.startRedis(3, servers.RedisConfig{Args: []string{"--save", "1 1"}})
	case BackendRedlock5:
		err = d.startRedis(5, servers.RedisConfig{})
	case BackendZK3:
		if err = servers.LookZooKeeper(); err == nil && d.certs != nil {
			d.zk, err = servers.LaunchEnsembleTLS(3, d.certs, true)
		} else if err == nil {
			d.zk, err = servers.LaunchEnsemble(3)
		}
	case BackendEtcd3:
		err = d.startEtcd()
	case BackendPostgres, BackendPostgresSession:
		err = d.startPostgres()
	case BackendMariaDB, BackendMariaDBSession:
		err = d.startMariaDB(clients)
	case BackendSentinel, BackendSentinelReplicas:
		err = d.startSentinel()
	case BackendCluster, BackendClusterReplicas:
		err = d.startCluster()
	default:
		return nil, fmt.Errorf("chaos: unknown backend %q; use one of %v", backend, Backends)
	}
	if err != nil {
		d.close()
		return nil, err
	}
	for range clients {
		var row []*servers.Proxy
		for i := range d.servers() {
			p, err := servers.NewProxy(d.addr(i))
			if err != nil {
				d.close()
				return nil, fmt.Errorf("chaos: proxy: %w", err)
			}
			row = append(row, p)
		}
		d.proxies = append(d.proxies, row)
	}
	return d, nil
}

func (d *deployment) startRedis(n int, cfg servers.RedisConfig) error {
	if _, err := servers.LookBinary("redis-server"); err != nil {
		return err
	}
	base := cfg.Args
	for range n {
		if d.certs != nil {
			args, port, err := d.redisTLSArgs()
			if err != nil {
				return err
			}
			cfg.Args = append(slices.Clone(base), args...)
			d.tlsAddrs = append(d.tlsAddrs, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		}
		r, err := servers.LaunchRedis(cfg)
		if err != nil {
			return err
		}
		d.redis = append(d.redis, r)
	}
	return nil
}

// kind is the kind of lock service, as clients know it.
func (d *deployment) kind() string {
	switch {
	case d.pg != nil, d.my != nil, d.links != nil, d.cluster != nil:
		return d.backend
	case d.zk != nil:
		return "zookeeper"
	case d.etcd != nil:
		return "etcd"
	case len(d.redis) == 1:
		return "redis"
	}
	return "redlock"
}

func (d *deployment) servers() int {
	if d.pg != nil || d.my != nil {
		return 1
	}
	if d.cluster != nil {
		return len(d.cluster.Nodes)
	}
	if d.zk != nil {
		return len(d.zk.Servers)
	}
	if d.etcd != nil {
		return len(d.etcd.Members)
	}
	return len(d.redis)
}

func (d *deployment) addr(i int) string {
	if d.pg != nil {
		return d.pg.Addr()
	}
	if d.my != nil {
		return d.my.Addr()
	}
	if d.cluster != nil {
		return d.cluster.Nodes[i].Addr()
	}
	if d.zk != nil {
		if d.certs != nil {
			return d.zk.Servers[i].TLSAddr()
		}
		return d.zk.Servers[i].Addr()
	}
	if d.tlsAddrs != nil {
		return d.tlsAddrs[i]
	}
	if d.etcd != nil {
		return d.etcd.Members[i].Addr()
	}
	return d.redis[i].Addr()
}

// name names server i for reports: "node 2 (127.0.0.1:41234)".
func (d *deployment) name(i int) string { return fmt.Sprintf("node %d (%s)", i+1, d.addr(i)) }

// clientAddrs returns the proxy addresses client c (0-based) connects to:
// on Sentinel, those of the Sentinels (see via for the rest).
func (d *deployment) clientAddrs(c int) []string {
	addrs := make([]string, len(d.proxies[c]))
	for i, p := range d.proxies[c] {
		addrs[i] = p.Addr()
	}
	if d.links != nil {
		return addrs[sentinelData:]
	}
	return addrs
}

// server is what the faults do to one server process.
type server interface {
	Kill() error
	Restart() error
	Pause() error
	Resume() error
}

func (d *deployment) server(i int) server {
	if d.pg != nil {
		return d.pg
	}
	if d.my != nil {
		return d.my
	}
	if d.cluster != nil {
		return d.cluster.Nodes[i]
	}
	if d.zk != nil {
		return d.zk.Servers[i]
	}
	if d.etcd != nil {
		return d.etcd.Members[i]
	}
	return d.redis[i]
}

// restartEmpty starts killed server i again without its data.
func (d *deployment) restartEmpty(i int) error {
	if d.pg != nil || d.my != nil {
		return errors.New("chaos: kill-empty is not a PostgreSQL or MariaDB fault")
	}
	if d.etcd != nil {
		return errors.New("chaos: kill-empty is not an etcd fault (a member without its data cannot rejoin)")
	}
	if d.zk != nil {
		return d.zk.Servers[i].RestartEmpty()
	}
	r := d.redis[i]
	for _, f := range []string{"appendonlydir", "appendonly.aof", "dump.rdb"} {
		if err := os.RemoveAll(filepath.Join(r.Dir(), f)); err != nil {
			return fmt.Errorf("chaos: wiping %s: %w", d.name(i), err)
		}
	}
	return r.Restart()
}

// lockValues returns the lock key's value on each Redis server: "" where
// the key is absent or the server did not answer.
func (d *deployment) lockValues(name string) []string {
	vs := make([]string, len(d.redis))
	for i, r := range d.redis {
		vs[i], _ = r.Do("GET", "dlock:{"+name+"}")
	}
	return vs
}

// expireScript expires KEYS[1] now if its value is still ARGV[1].
const expireScript = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], 1) end return 0`

// expire makes the lock key on Redis server i expire now, if its value is
// still value; it reports whether it did.
func (d *deployment) expire(i int, name, value string) (bool, error) {
	if len(d.redis) == 0 {
		return false, errors.New("chaos: expire is a Redis fault")
	}
	n, err := d.redis[i].Do("EVAL", expireScript, "1", "dlock:{"+name+"}", value)
	return n == "1", err
}

// leader returns the index of the ZooKeeper or etcd leader.
func (d *deployment) leader() (int, error) {
	if d.etcd != nil {
		return d.etcdLeader()
	}
	if d.zk == nil {
		return 0, errors.New("chaos: leader-kill is a ZooKeeper and etcd fault")
	}
	l, err := d.zk.Leader()
	if err != nil {
		return 0, err
	}
	for i, z := range d.zk.Servers {
		if z == l {
			return i, nil
		}
	}
	return 0, errors.New("chaos: the leader is not a member")
}

// serverProxies returns every client's proxy to server i.
func (d *deployment) serverProxies(i int) []*servers.Proxy {
	ps := make([]*servers.Proxy, len(d.proxies))
	for c, row := range d.proxies {
		ps[c] = row[i]
	}
	return ps
}

// close stops every proxy and server.
func (d *deployment) close() error {
	var errs []error
	for _, row := range d.proxies {
		for _, p := range row {
			errs = append(errs, p.Close())
		}
	}
	for _, r := range d.redis {
		r.Resume() // a paused server cannot be stopped gracefully
		errs = append(errs, r.Close())
	}
	for _, l := range d.links {
		errs = append(errs, l.Close())
	}
	if d.zk != nil {
		for _, z := range d.zk.Servers {
			z.Resume()
		}
		errs = append(errs, d.zk.Close())
	}
	if d.pg != nil {
		errs = append(errs, d.pg.Close()) // resumes a paused server
	}
	if d.my != nil {
		errs = append(errs, d.my.Close()) // resumes a paused server
	}
	if d.etcd != nil {
		errs = append(errs, d.etcd.Close()) // resumes a paused member
	}
	if d.cluster != nil {
		errs = append(errs, d.cluster.Close()) // resumes paused nodes
	}
	if d.certsDir != "" {
		errs = append(errs, os.RemoveAll(d.certsDir))
	}
	return errors.Join(errs...)
}
