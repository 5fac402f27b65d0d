package lockbench

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlock-go/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// Z1 and Z2 contenders: dlock's zklock.Mutex, go-zookeeper's own zk.Lock
// and dlock's redislock.Mutex. They run only in Z1 and Z2, whatever
// -contenders says.
const (
	ZKDlockName = "dlock-zk"
	ZKPeerName  = "zk.Lock"
	ZKRedisName = "dlock-redis"
)

// ZKSessionTimeout is the session timeout every ZooKeeper contender asks
// for (the ensemble grants it: its bounds are 400ms–60s).
const ZKSessionTimeout = 10 * time.Second

// zkConnectTimeout bounds the wait for a session when a client opens.
const zkConnectTimeout = 30 * time.Second

// ZKContenders are Z1's and Z2's contenders. ZooKeeper ones have
// OpenNodes (the ensemble's addresses), the Redis one Open.
func ZKContenders() []Contender {
	return []Contender{
		{Name: ZKDlockName, OpenNodes: openZKDlock,
			Config: fmt.Sprintf("zklock.Mutex on its own zklock.Session (`zklock.Connect` to one server, see the notes, "+
				"`WithSessionTimeout(%s)`, a discarding slog logger, `WithEventCallback` counting watch notifications); "+
				"`WithTTL(10s)` (the lease time in force is min(TTL, session timeout ÷ 3) = 3.3s), renewal on (default); "+
				"a waiter watches only the node just ahead of it (ExistsW). One Mutex per Lock call.", ZKSessionTimeout)},
		{Name: ZKPeerName, OpenNodes: openZKPeer,
			Config: fmt.Sprintf("go-zookeeper %s `zk.NewLock(conn, path, zk.WorldACL(zk.PermAll))`, `Lock()` / `Unlock()`, "+
				"on its own `zk.Connect([]string{server}, %s, zk.WithLogInfo(false), zk.WithLogger(discard), zk.WithEventCallback(count))`; "+
				"a waiter watches the node just ahead of it (GetW); its parents are persistent nodes. Lock takes no context. "+
				"One zk.Lock per Lock call.", moduleVersion("github.com/go-zookeeper/zk"), ZKSessionTimeout)},
		dlockRedisReference(),
	}
}

// dlockRedisReference is the Redis contender that Z1, Z2, P1 and P2
// compare other backends with.
func dlockRedisReference() Contender {
	return Contender{Name: ZKRedisName, DlockTransport: "goredis", LuaInternal: dlockLuaInternal,
		Open: func(addr string) (Client, error) { return openDlockClient(addr, "goredis") },
		Config: "redislock.Mutex over goredisconn (go-redis v9 default options) on the benchmark's redis-server, " +
			"exactly as dlock-goredis in S1–S3: `WithTTL(10s)`, renewal on, `Lock` with the default retry (pub/sub " +
			"release notice + jittered poll). One Mutex per Lock call."}
}

// openZ opens n independent clients of a Z1/Z2 contender. ZooKeeper
// client i connects to one server, zkCluster.serverFor(i): a follower for
// Z1's single client, and the same spread over the ensemble for every
// contender in Z2.
func openZ(c Contender, env zkEnv, n int) ([]Client, error) {
	if c.OpenNodes == nil {
		return openAll(c, env.redis.addr(), n)
	}
	clients := make([]Client, 0, n)
	for i := range n {
		cl, err := c.OpenNodes(env.zk.serverFor(i))
		if err != nil {
			closeAll(clients)
			return nil, fmt.Errorf("%s: open: %w", c.Name, err)
		}
		clients = append(clients, cl)
	}
	return clients, nil
}

// A notifier counts the watch notifications its connection delivered.
type notifier interface{ notifications() int64 }

// watchCounter counts watch notifications (node deleted, data changed,
// children changed) seen by a connection's event callback.
type watchCounter struct{ n atomic.Int64 }

func (w *watchCounter) onEvent(ev zk.Event) {
	switch ev.Type {
	case zk.EventNodeDeleted, zk.EventNodeDataChanged, zk.EventNodeChildrenChanged:
		w.n.Add(1)
	}
}

func (w *watchCounter) notifications() int64 { return w.n.Load() }

var discardSlog = slog.New(slog.DiscardHandler)

// zkDlockClient is one zklock.Session.
type zkDlockClient struct {
	watchCounter
	s *zklock.Client
}

func openZKDlock(addrs []string) (Client, error) {
	c := &zkDlockClient{}
	ctx, cancel := context.WithTimeout(context.Background(), zkConnectTimeout)
	defer cancel()
	s, err := zklock.New(ctx, addrs, zklock.WithSessionTimeout(ZKSessionTimeout), zklock.WithLogger(discardSlog),
		zklock.WithEventCallback(c.onEvent))
	if err != nil {
		return nil, err
	}
	c.s = s
	return c, nil
}

func (c *zkDlockClient) Lock(ctx context.Context, path string) (Release, error) {
	l, err := c.s.NewMutex(path, zklock.WithTTL(LockTTL)).Lock(ctx)
	if err != nil {
		return nil, err
	}
	return l.Release, nil
}

func (c *zkDlockClient) Close() error { return c.s.Close() }

// zkPeerClient is one go-zookeeper connection taking zk.Lock.
type zkPeerClient struct {
	watchCounter
	conn *zk.Conn
}

// discardZKLog drops go-zookeeper's log lines.
type discardZKLog struct{}

func (discardZKLog) Printf(string, ...any) {}

func openZKPeer(addrs []string) (Client, error) {
	c := &zkPeerClient{}
	ready := make(chan struct{})
	var once sync.Once
	conn, _, err := zk.Connect(addrs, ZKSessionTimeout, zk.WithLogInfo(false), zk.WithLogger(discardZKLog{}),
		zk.WithEventCallback(func(ev zk.Event) {
			c.onEvent(ev)
			if ev.Type == zk.EventSession && ev.State == zk.StateHasSession {
				once.Do(func() { close(ready) })
			}
		}))
	if err != nil {
		return nil, err
	}
	select { // the event channel is left alone: go-zookeeper drops events it cannot deliver
	case <-ready:
	case <-time.After(zkConnectTimeout):
		conn.Close()
		return nil, fmt.Errorf("no session with %v within %s (state %v)", addrs, zkConnectTimeout, conn.State())
	}
	c.conn = conn
	return c, nil
}

// Lock ignores ctx: zk.Lock.Lock takes none.
func (c *zkPeerClient) Lock(_ context.Context, path string) (Release, error) {
	l := zk.NewLock(c.conn, path, zk.WorldACL(zk.PermAll))
	if err := l.Lock(); err != nil {
		return nil, err
	}
	return func(context.Context) error { return l.Unlock() }, nil
}

func (c *zkPeerClient) Close() error {
	c.conn.Close()
	return nil
}
