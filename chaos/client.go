package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dlock-go/dlock"
	"github.com/dlock-go/dlock/pglock"
	"github.com/dlock-go/dlock/redislock"
	"github.com/dlock-go/dlock/redislock/goredisconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// ClientEnv is the environment variable that makes a process a chaos
// client: it holds the client's configuration as JSON. The harness starts
// its clients as copies of its own executable with ClientEnv set, so a
// program that runs the harness must call RunClientIfChild first thing.
const ClientEnv = "DLOCK_CHAOS_CLIENT"

// clientConfig is what the harness tells a client process.
type clientConfig struct {
	ID             int           `json:"id"`
	Kind           string        `json:"kind"` // the service's client kind, or the backend (see service.client)
	Addrs          []string      `json:"addrs"`
	Name           string        `json:"name"`
	TTL            time.Duration `json:"ttl"`
	Work           time.Duration `json:"work"`
	Store          string        `json:"store"`
	SessionTimeout time.Duration `json:"session_timeout"`
	Seed           uint64        `json:"seed"`
	// LibraryDefaults: see Options.LibraryDefaults.
	LibraryDefaults bool `json:"library_defaults"`
	// Via maps the addresses the Sentinels hand out, or the Cluster's
	// nodes announce, to the client's proxies to those servers (Sentinel
	// and Cluster only; on Sentinel, Addrs are the Sentinels').
	Via map[string]string `json:"via,omitempty"`
	// TLS, if set, is how to reach the servers through TLS.
	TLS *clientTLS `json:"tls,omitempty"`
}

// RunClientIfChild runs a chaos client and exits, if this process was
// started as one (ClientEnv is set); otherwise it returns at once.
func RunClientIfChild() {
	raw := os.Getenv(ClientEnv)
	if raw == "" {
		return
	}
	os.Exit(clientMain(raw, os.Stdin, os.Stdout, os.Stderr))
}

// clientMain runs a client until stdin closes or SIGTERM arrives, writing
// its events to out as JSON lines, and returns the exit code.
func clientMain(raw string, in io.Reader, out, errOut io.Writer) int {
	var cfg clientConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintf(errOut, "chaos client: bad %s: %v\n", ClientEnv, err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { // the harness closes stdin to stop the client
		io.Copy(io.Discard, in)
		cancel()
	}()
	sigCtx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()

	c := &client{cfg: cfg, out: bufio.NewWriter(out), rng: rand.New(rand.NewPCG(cfg.Seed, uint64(cfg.ID)))}
	if err := c.run(sigCtx); err != nil {
		fmt.Fprintf(errOut, "chaos client %d: %v\n", cfg.ID, err)
		return 1
	}
	return 0
}

type client struct {
	cfg clientConfig
	rng *rand.Rand

	mu  sync.Mutex // guards out
	out *bufio.Writer

	cur atomic.Pointer[held] // the lease held now, for renewal events
}

type held struct {
	fence uint64
	lease dlock.Lease
}

// emit writes one event, stamped now unless e.At is set.
func (c *client) emit(e Event) {
	if e.At == 0 {
		e.At = Now()
	}
	e.Client = c.cfg.ID
	b, _ := json.Marshal(e) // an Event always marshals
	c.mu.Lock()
	c.out.Write(append(b, '\n'))
	c.out.Flush()
	c.mu.Unlock()
}

// Observe records renewals: the lease's Until moved.
func (c *client) Observe(e dlock.Event) {
	if e.Kind != dlock.EventRenewed {
		return
	}
	if h := c.cur.Load(); h != nil && h.fence == e.Fence {
		c.emit(Event{Op: OpRenew, Fence: e.Fence, Until: At(h.lease.Until())})
	}
}

func (c *client) run(ctx context.Context) error {
	locker, closeLocker, err := c.connect(ctx)
	if err != nil {
		return err
	}
	// Closing can wait for a server the last fault has just let go of
	// (zklock's Session.Close waits up to 10s for a reconnecting session);
	// the run is over by then, so give it a little and exit anyway.
	defer closeWithin(closeLocker, 2*time.Second)
	store, err := dialStore(c.cfg.Store)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	defer store.close()
	for seq := 1; ctx.Err() == nil; seq++ {
		if err := c.cycle(ctx, locker, store, seq); err != nil {
			return err
		}
		// A short rest, so that a releasing client does not always win.
		sleep(ctx, time.Duration(c.rng.Int64N(int64(c.cfg.Work)/2+1)))
	}
	return nil
}

// cycle takes the lock once and runs the critical section: read the set,
// work, write the set with one more element, and write the fenced register.
// The client is deliberately naive: it does not look at Done inside the
// critical section, as a client paused at the wrong instant could not
// either; fencing has to cover it.
func (c *client) cycle(ctx context.Context, locker dlock.Locker, store *storeConn, seq int) error {
	c.emit(Event{Op: OpAcquire})
	lctx, cancel := context.WithTimeout(ctx, 10*c.cfg.TTL)
	l, err := locker.Lock(lctx)
	timedOut := lctx.Err() != nil
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			c.emit(Event{Op: OpFail, Err: err.Error(), Class: lockClass(err, timedOut)})
			sleep(ctx, c.cfg.TTL/10)
		}
		return nil
	}
	fence := l.Fence()
	c.cur.Store(&held{fence: fence, lease: l})
	c.emit(Event{Op: OpGrant, Fence: fence, Until: At(l.Until())})
	go func() {
		<-l.Done()
		at := Now()
		why := "released"
		if err := l.Err(); !errors.Is(err, dlock.ErrReleased) {
			why = fmt.Sprint(err)
		}
		c.emit(Event{At: at, Op: OpDone, Fence: fence, Err: why})
	}()

	c.emit(Event{Op: OpEnter, Fence: fence})
	elem := fmt.Sprintf("c%d-%d", c.cfg.ID, seq)
	c.emit(Event{Op: OpRegRead})
	rf, rv, err := store.read()
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	c.emit(Event{Op: OpRegReply, Fence: rf, Value: rv})
	set, err := store.get()
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	sleep(context.Background(), c.cfg.Work) // the work; not cut short by a stop
	if err := store.put(append(set, elem)); err != nil {
		return fmt.Errorf("store: %w", err)
	}
	c.emit(Event{Op: OpAdded, Fence: fence, Value: elem})
	c.emit(Event{Op: OpRegWrite, Fence: fence, Value: elem})
	ok, max, err := store.write(c.cfg.ID, fence, elem)
	if err != nil {
		return fmt.Errorf("store: %w", err)
	}
	reply := Event{Op: OpRegReply, Fence: fence, Value: elem}
	if !ok {
		reply.Err, reply.Max = "refused", max
	}
	c.emit(reply)
	c.emit(Event{Op: OpExit, Fence: fence})

	c.emit(Event{Op: OpRelease, Fence: fence})
	rctx, cancel := context.WithTimeout(context.Background(), c.cfg.TTL)
	l.Release(rctx) // its outcome reaches the history through Done
	cancel()
	c.cur.Store(nil)
	return nil
}

// lockClass returns the class of a failed Lock call's error err (see
// OpFail): timedOut says whether the call's own context had ended when it
// returned.
func lockClass(err error, timedOut bool) string {
	switch {
	case timedOut:
		return LockTimedOut
	case errors.Is(err, dlock.ErrUnavailable):
		return LockUnavailable
	case errors.Is(err, dlock.ErrNotObtained):
		return LockNotObtained
	}
	return LockError
}

// connect makes the lock the client contends for, through its proxies.
func (c *client) connect(ctx context.Context) (dlock.Locker, func(), error) {
	cfg := c.cfg
	if cfg.TTL <= 0 || len(cfg.Addrs) == 0 || cfg.Name == "" {
		return nil, nil, fmt.Errorf("incomplete configuration %+v", cfg)
	}
	s := serviceOfClient(cfg.Kind)
	if s == nil {
		return nil, nil, fmt.Errorf("unknown kind %q", cfg.Kind)
	}
	return s.connect(c, ctx, min(cfg.TTL/4, time.Second))
}

// connectPostgres makes the pglock Mutex or SessionMutex the client
// contends for, on a pool of connections through its proxy, each named
// after the client so that the terminate fault can find them.
func (c *client) connectPostgres(ctx context.Context) (dlock.Locker, func(), error) {
	cfg, err := pgxpool.ParseConfig(pgClientURL(c.cfg.Addrs[0], c.cfg.ID))
	if err != nil {
		return nil, nil, err
	}
	cfg.ConnConfig.ConnectTimeout = min(c.cfg.TTL/4, time.Second)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	pc := pglock.New(pool, pglock.WithObserver(c))
	stop := func() { pc.Close(); pool.Close() }
	if c.cfg.Kind == BackendPostgresSession {
		return pc.NewSessionMutex(c.cfg.Name, pglock.WithTTL(c.cfg.TTL)), stop, nil
	}
	return pc.NewMutex(c.cfg.Name, pglock.WithTTL(c.cfg.TTL)), stop, nil
}

// connectSentinel makes the redislock Mutex the client contends for, on
// go-redis's failover client as users build it (library defaults and
// ContextTimeoutEnabled), asking the Sentinels for the master. Its dialer
// only reroutes each address through the client's proxy to that server.
func (c *client) connectSentinel() (dlock.Locker, func(), error) {
	redis.SetLogger(quietRedis{})
	var d net.Dialer
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: sentinelMaster, SentinelAddrs: c.cfg.Addrs,
		ContextTimeoutEnabled: true, Dialer: c.dialVia(&d)})
	rc := redislock.New(goredisconn.New(rdb), redislock.WithObserver(c))
	opts := []redislock.Option{redislock.WithTTL(c.cfg.TTL)}
	if c.cfg.Kind == BackendSentinelReplicas {
		opts = append(opts, redislock.WithReplicas(1, sentinelReplicaTimeout(c.cfg.TTL)))
	}
	return rc.NewMutex(c.cfg.Name, opts...), func() { rc.Close(); rdb.Close() }, nil
}

// connectCluster makes the redislock Mutex the client contends for, on
// go-redis's cluster client as the README builds it (library defaults and
// ContextTimeoutEnabled), seeded with the client's proxies to the nodes.
// Its dialer only reroutes the addresses the nodes announce through the
// client's proxy to each.
func (c *client) connectCluster() (dlock.Locker, func(), error) {
	redis.SetLogger(quietRedis{})
	var d net.Dialer
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.cfg.Addrs, ContextTimeoutEnabled: true,
		Dialer: c.dialVia(&d)})
	rc := redislock.New(goredisconn.New(rdb), redislock.WithObserver(c))
	opts := []redislock.Option{redislock.WithTTL(c.cfg.TTL)}
	if c.cfg.Kind == BackendClusterReplicas {
		opts = append(opts, redislock.WithReplicas(1, clusterReplicaTimeout(c.cfg.TTL)))
	}
	return rc.NewMutex(c.cfg.Name, opts...), func() { rc.Close(); rdb.Close() }, nil
}

// dialVia returns a dialer that reaches each address in Via through the
// client's proxy to that server.
func (c *client) dialVia(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	via := c.cfg.Via
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if p, ok := via[addr]; ok {
			addr = p
		}
		return d.DialContext(ctx, network, addr)
	}
}

// closeWithin runs stop and waits for it at most d.
func closeWithin(stop func(), d time.Duration) {
	done := make(chan struct{})
	go func() {
		stop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
